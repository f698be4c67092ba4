"""The HTML reports read as reports: text, tables and figures first, each code cell folded behind a toggle."""

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from dlcluster.report.runner import render_html


def test_code_is_folded_and_text_tables_and_figures_are_not(tmp_path):
    source = "\n".join(f"rep.add('k{i}', {i})" for i in range(20)) + "\ntable"
    nb = new_notebook(cells=[
        new_markdown_cell("# A finding\n\nThe text a reader reads first."),
        new_code_cell(source, execution_count=1, outputs=[
            new_output("execute_result", {"text/html": "<table><tr><td>a table</td></tr></table>",
                                          "text/plain": "a table"}, execution_count=1)]),
    ])
    executed = tmp_path / "09-x.ipynb"
    nbformat.write(nb, executed)
    page = render_html(executed).read_text()
    folded = page.split('<details class="dl-code">')
    assert len(folded) == 2 and "<summary>code (21 lines)</summary>" in folded[1]
    code, after = folded[1].split("</details>", 1)
    assert "rep" in code and "k19" in code              # the code is inside the toggle
    assert "a table" in after and "a table" not in code  # its output is not
    assert "The text a reader reads first." in folded[0]
    assert "show all code" in page
