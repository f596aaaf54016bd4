--[[
Solutions to the exercises, as collapsed callouts.

In a lesson notebook a worked solution is one markdown cell written as HTML `<details>`,
which every Jupyter front end (JupyterLab, Notebook 7, nbclassic) shows closed, however
the notebook is run:

    <details class="solution">
    <summary>Solution to exercise N.M</summary>

    prose and ```python blocks, as markdown

    </details>

Pandoc reads that as raw HTML blocks around markdown blocks. This filter, declared in
_quarto.yml, turns each such run of blocks into Quarto's collapsed callout: a tip titled
"Solution to exercise N.M" that also carries the class `solution`. Under plain pandoc
(no `quarto` module) it makes the Div that Quarto would read as that callout: classes
`callout-tip` and `solution`, attributes `collapse="true"` and the title. A
`<details class="solution">` without a `<summary>` title or without its closing
`</details>` stops the render with an error that names the input file. Other `<details>`
blocks are left alone.

In print (Typst, the PDF) a solution stays out of the reader's way too: each one moves
to an appendix "Solutions" at the end of the book, under its title. In its place the
exercise gets a line that links to it and gives its page, and the solution ends with a
link back to the exercise and its page.
]]

local OPEN = '^%s*<details class="solution">%s*$'

local function is_html(block, pattern)
  return block and block.t == "RawBlock" and (block.format == "html" or block.format == "html5")
    and block.text:match(pattern) ~= nil
end

local function where()
  if quarto and quarto.doc and quarto.doc.input_file then
    return quarto.doc.input_file
  end
  return table.concat(PANDOC_STATE and PANDOC_STATE.input_files or {}, ", ")
end

local function fail(message)
  error("solutions.lua: " .. where() .. ": " .. message, 0)
end

-- The title held by `<summary>`: pandoc reads `<summary>Title</summary>` on one line as
-- a raw `<summary>`, the title as plain text and a raw `</summary>`.
local function summary_at(blocks, i)
  if is_html(blocks[i], "^%s*<summary>%s*$") and blocks[i + 1] and blocks[i + 1].t == "Plain"
      and is_html(blocks[i + 2], "^%s*</summary>%s*$") then
    return pandoc.utils.stringify(blocks[i + 1]), i + 3
  end
  local title = blocks[i] and blocks[i].t == "RawBlock" and blocks[i].text:match("^%s*<summary>(.-)</summary>%s*$")
  if title then
    return title, i + 1
  end
  return nil, i
end

-- Quarto reads callout Divs before user filters run, so a Div made here would stay a
-- plain Div; quarto.Callout makes the callout itself. Plain pandoc gets the Div.
local function callout(body, title)
  if quarto and quarto.Callout then
    local node = quarto.Callout({ type = "tip", title = title, collapse = true, content = body,
      attr = pandoc.Attr("", { "solution" }) })
    return node
  end
  return pandoc.Div(body, pandoc.Attr("", { "callout-tip", "solution" }, { collapse = "true", title = title }))
end

local function is_typst()
  if quarto and quarto.doc and quarto.doc.is_format then
    return quarto.doc.is_format("typst")
  end
  return FORMAT == "typst"
end

local PRINT = is_typst()

-- In print: the solutions in the order met, each {title, key, body}.
local collected = {}

local function typst_text(inlines)
  return pandoc.write(pandoc.Pandoc({ pandoc.Plain(inlines) }), "typst"):gsub("%s+$", "")
end

-- Typst: the page number of the place labelled `label`, as the page shows it.
local function page_of(label)
  return pandoc.RawInline("typst", "#context { let here = locate(<" .. label .. ">); "
    .. "let style = here.page-numbering(); "
    .. "if style == none { str(here.page()) } else { numbering(style, ..counter(page).at(here)) } }")
end

-- The line that takes a solution's place in print.
local function pointer(title, key)
  local exercise, solution = "print-exercise-" .. key, "print-solution-" .. key
  local line = pandoc.Para({
    pandoc.Link({ pandoc.Strong({ pandoc.Str(title) }) }, "#" .. solution),
    pandoc.Str(":"), pandoc.Space(), pandoc.Str("in"), pandoc.Space(), pandoc.Str("the"), pandoc.Space(),
    pandoc.Str("appendix"), pandoc.Space(), pandoc.Quoted("DoubleQuote", { pandoc.Str("Solutions") }),
    pandoc.Str(","), pandoc.Space(), pandoc.Str("page"), pandoc.Space(), page_of(solution), pandoc.Str("."),
  })
  return pandoc.Div({ line }, pandoc.Attr(exercise, { "solution-pointer" }))
end

-- The appendix: a chapter "Solutions", one unnumbered section per solution, each with a
-- link back. Its sections stay out of the table of contents. `start_part`: begin
-- orange-book's appendix part (its template imports `appendices`) as Quarto begins it
-- for a book's first appendix; a book with appendices of its own has begun it already.
local function appendix(start_part)
  local blocks = pandoc.Blocks({})
  if start_part then
    blocks:insert(pandoc.RawBlock("typst", '#show: appendices.with("Appendices", hide-parent: true)'))
  end
  blocks:insert(pandoc.Header(1, { pandoc.Str("Solutions") }, pandoc.Attr("print-solutions")))
  blocks:insert(pandoc.Para({ pandoc.Str("The worked solutions to the exercises, in the order of the lessons.") }))
  for _, item in ipairs(collected) do
    blocks:insert(pandoc.RawBlock("typst", "#heading(level: 2, numbering: none, outlined: false)["
      .. typst_text({ pandoc.Str(item.title) }) .. "] <print-solution-" .. item.key .. ">"))
    blocks:extend(item.body)
    blocks:insert(pandoc.Para({
      pandoc.Link({ pandoc.Str("Back"), pandoc.Space(), pandoc.Str("to"), pandoc.Space(), pandoc.Str("exercise"),
        pandoc.Space(), pandoc.Str(item.key) }, "#print-exercise-" .. item.key),
      pandoc.Space(), pandoc.Str("(page"), pandoc.Space(), page_of("print-exercise-" .. item.key), pandoc.Str(")"),
    }))
  end
  return blocks
end

local function solution_block(body, title)
  if not PRINT then
    return callout(body, title)
  end
  local key = title:match("(%d+%.%d+)%s*$") or tostring(#collected + 1)
  for _, item in ipairs(collected) do
    if item.key == key then
      fail('two solutions are titled "' .. title .. '"')
    end
  end
  table.insert(collected, { title = title, key = key, body = body })
  return pointer(title, key)
end

function Pandoc(doc)
  if PRINT and #collected > 0 then
    local book = doc.meta.book
    doc.blocks:extend(appendix(book ~= nil and (book.appendices == nil or #book.appendices == 0)))
    return doc
  end
end

function Blocks(blocks)
  local out = pandoc.Blocks({})
  local i = 1
  while i <= #blocks do
    local block = blocks[i]
    if is_html(block, OPEN) then
      local title, start = summary_at(blocks, i + 1)
      if not title or title:match("^%s*$") then
        fail('a <details class="solution"> must open with <summary>Solution to exercise N.M</summary>')
      end
      local depth, j = 0, start
      local body = pandoc.Blocks({})
      while true do
        local inner = blocks[j]
        if inner == nil then
          fail('the solution "' .. title .. '" has no closing </details>')
        end
        if is_html(inner, "^%s*<details[%s>]") then
          depth = depth + 1
        elseif is_html(inner, "^%s*</details>%s*$") then
          if depth == 0 then
            break
          end
          depth = depth - 1
        end
        body:insert(inner)
        j = j + 1
      end
      out:insert(solution_block(body, title))
      i = j + 1
    else
      out:insert(block)
      i = i + 1
    end
  end
  return out
end
