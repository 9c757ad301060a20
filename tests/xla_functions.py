"""Which functions of a graph XLA must compile: the training-only GELU's must never reach a
graph that inference or an export runs."""


def xla_compiled_functions(graph_def):
  """Names of the functions in `graph_def`'s library marked `_XlaMustCompile`.

  Args:
    graph_def: a `tf.compat.v1.GraphDef` (a traced function's, or a SavedModel meta graph's).

  Returns:
    A list of function names, empty when nothing must be compiled.
  """
  return [function.signature.name for function in graph_def.library.function
          if function.attr["_XlaMustCompile"].b]
