"""Multiple choice: one context, several endings, a softmax over them (`run_multiple_choice.py`)."""
