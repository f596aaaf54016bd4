--[[
"Going further", folded on the website.

A lesson's section titled "Going further" holds what is not its core. On an HTML page
this filter puts everything after that level-2 heading, up to the next level-2 heading,
into one closed `<details>` (class `book-going-further`): the heading stays in view, the
rest opens with a click. The build without Quarto does the same (bookkit/build.py,
`_fold_going_further`). In print (Typst, the PDF) the section is left as it is.
]]

local SUMMARY = '<details class="book-going-further"><summary>Open "Going further": '
  .. 'beyond the core of this lesson</summary>'

local function going_further(block)
  return block.t == "Header" and block.level == 2
    and pandoc.utils.stringify(block.content):match("^Going further") ~= nil
end

function Pandoc(doc)
  if not FORMAT:match("html") then
    return nil
  end
  local blocks, open = pandoc.List(), false
  for _, block in ipairs(doc.blocks) do
    if open and block.t == "Header" and block.level <= 2 then
      blocks:insert(pandoc.RawBlock("html", "</details>"))
      open = false
    end
    blocks:insert(block)
    if going_further(block) then
      blocks:insert(pandoc.RawBlock("html", SUMMARY))
      open = true
    end
  end
  if open then
    blocks:insert(pandoc.RawBlock("html", "</details>"))
  end
  doc.blocks = blocks
  return doc
end
