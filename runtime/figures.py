"""The book's pipeline figure, drawn from code so that every engine shows the same picture.

Shown in lesson 1, "What the pipeline does": a question goes through retrieval, a
prompt, the reader and the strict parser; the parsed reply is scored and screened, and a
person reviews it. Each stage names the lessons that build it.
"""
from __future__ import annotations

#: The stages, left to right, with the lessons that build each.
STAGES = (
    ("Question", "typed by a caller", ""),
    ("Retrieval", "tf-idf, dense, hybrid", "lessons 1, 2"),
    ("Prompt", "question + passages", "lessons 1, 5"),
    ("Reader", "a local model", "lessons 1, 3"),
    ("Parser", "two strict lines", "lessons 1, 3"),
    ("Score, screen", "EM, F1, six checks", "lesson 1"),
    ("Review", "a person reads", "lesson 4"),
)


def pipeline_figure():
    """A row of boxes joined by arrows, one per stage of :data:`STAGES`; returns the
    matplotlib figure (a notebook shows it as the cell's output)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    figure, axes = plt.subplots(figsize=(11, 1.5), dpi=150)
    axes.set(xlim=(0, len(STAGES) * 1.6), ylim=(0.3, 1.7))
    axes.axis("off")
    for number, (name, what, lessons) in enumerate(STAGES):
        left = number * 1.6 + 0.1
        axes.add_patch(FancyBboxPatch((left, 0.7), 1.25, 0.9, boxstyle="round,pad=0.03",
                                      facecolor="#eef3f8", edgecolor="#3b5b7a", linewidth=1.2))
        for y, text, style in ((1.32, name, {"fontsize": 9.5, "weight": "bold", "wrap": True}),
                               (0.98, what, {"fontsize": 7.5}),
                               (0.45, lessons, {"fontsize": 7.5, "color": "#555555"})):
            axes.text(left + 0.625, y, text, ha="center", va="center", **style)
        if number:
            axes.add_patch(FancyArrowPatch((left - 0.22, 1.15), (left - 0.02, 1.15),
                                           arrowstyle="-|>", mutation_scale=12,
                                           color="#3b5b7a"))
    figure.tight_layout()
    plt.close(figure)
    return figure
