"""What a label of a classification-style task is: one class of a list (CLASSIFICATION), a number
(REGRESSION) or a set of classes (MULTI_LABEL). The kind decides the record features, the loss,
the metrics and what an export returns."""

CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTI_LABEL = "multi_label"
