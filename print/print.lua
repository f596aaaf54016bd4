--[[
What the printed book (Quarto's Typst output, the PDF) needs beyond the website; declared
in _quarto.yml, and a no-op for every other format.

- A figure without a caption gets its alt text as its caption: on paper the alt text is
  the only description a reader can get. This covers a figure cell with `fig-alt` and no
  `fig-cap`, and an image an output shows with alt text but no caption.
- Code and its output are set ragged right: the book's justified paragraphs would
  otherwise stretch the spaces of a wrapped line of code.
]]

local function is_typst()
  if quarto and quarto.doc and quarto.doc.is_format then
    return quarto.doc.is_format("typst")
  end
  return FORMAT == "typst"
end

if not is_typst() then
  return {}
end

-- The alt text of an image: its `fig-alt` attribute, else its description.
local function alt_text(image)
  local alt = image.attributes["fig-alt"]
  if alt and alt ~= "" then
    return alt
  end
  local described = pandoc.utils.stringify(image.caption or {})
  if described ~= "" then
    return described
  end
  return nil
end

local function first_image(node)
  local found = nil
  pandoc.walk_block(pandoc.Div(node), {
    Image = function(image)
      found = found or image
    end,
  })
  return found
end

local function is_empty(content)
  return content == nil or pandoc.utils.stringify(content) == ""
end

local function caption_of(text)
  return pandoc.Inlines({ pandoc.Str(text) })
end

return {
  {
    -- Quarto's figure float (a cell labelled fig-...): its caption, or else the alt text.
    FloatRefTarget = function(float)
      if float.type == "Figure" and is_empty(float.caption_long) then
        local image = first_image(float.content)
        local alt = image and (image.attributes["fig-alt"] or float.attributes and float.attributes["fig-alt"])
        alt = alt or (image and alt_text(image))
        if alt and alt ~= "" then
          float.caption_long = pandoc.Plain(caption_of(alt))
          return float
        end
      end
    end,
    -- A paragraph that holds one image and nothing else, shown without a caption.
    Para = function(para)
      if #para.content == 1 and para.content[1].t == "Image" then
        local image = para.content[1]
        local alt = alt_text(image)
        if alt then
          return pandoc.Figure(pandoc.Plain({ image }), { pandoc.Plain(caption_of(alt)) })
        end
      end
    end,
    CodeBlock = function(code)
      return {
        pandoc.RawBlock("typst", "#block(width: 100%)[#set par(justify: false)"),
        code,
        pandoc.RawBlock("typst", "]"),
      }
    end,
  },
}
