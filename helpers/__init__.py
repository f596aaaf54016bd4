"""Helper package for the Riverton question-answering lessons.

Each module holds small functions over pandas DataFrames or plain values; the lessons
hold the prose and the orchestration. A function's docstring names the lesson section
that explains it.
"""
