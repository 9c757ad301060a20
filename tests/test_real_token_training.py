"""Fine-tuning outside XLA computes the real tokens alone where the loss reads no padding."""

import types

import numpy as np
import pytest
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from serving import servable
from tasks import classifier
from tasks import runner
from tasks.classification import spec as classification_spec
from tasks.multiple_choice import spec as multiple_choice_spec
from tasks.ner import spec as ner_spec
from tasks.squad import spec as squad_spec
from tests import scripts
from tests.conftest import SAMPLES_DIR

TINY = bert_config_lib.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=32)


@pytest.mark.parametrize("jit_compile, expected", [(False, True), (True, False)])
def test_batches_are_computed_on_their_real_tokens_outside_xla(jit_compile, expected):
  config = types.SimpleNamespace(jit_compile=jit_compile)
  assert runner.drop_padding_of(config, tf.distribute.get_strategy()) is expected


def test_each_family_builds_its_training_model_as_the_runner_says():
  config = types.SimpleNamespace(max_seq_length=16)
  inputs = types.SimpleNamespace(processor=types.SimpleNamespace(kind=classifier.CLASSIFICATION),
                                 label_list=["a", "b"])
  for spec in (classification_spec.ClassificationSpec(), ner_spec.NerSpec(),
               multiple_choice_spec.MultipleChoiceSpec()):
    for drop_padding in (False, True):
      model = spec.make_task(config, TINY, inputs, drop_padding).build_model()
      assert model.drop_padding is drop_padding, type(spec).__name__
  # The span loss reads every position, padding included (the original's): never dropped.
  span_model = squad_spec.SquadSpec().make_task(config, TINY, inputs, True).build_model()
  assert not span_model.encoder.drop_padding


def test_a_tagger_trained_on_the_real_tokens_is_served_on_every_position():
  trained = ner_spec.NerSpec().make_task(types.SimpleNamespace(max_seq_length=8), TINY,
                                         types.SimpleNamespace(label_list=["O", "B", "I"]),
                                         drop_padding=True).build_model()
  assert trained.drop_padding
  ids = tf.constant([[2, 7, 8, 3, 0, 0, 0, 0], [2, 5, 6, 6, 6, 6, 6, 3]])
  inputs = {"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
            "segment_ids": tf.zeros_like(ids)}
  served = servable.served_copy(trained)
  assert not served.drop_padding
  padded = trained.rebuilt(drop_padding=False)
  np.testing.assert_allclose(served(inputs).numpy(), padded(inputs).numpy(), atol=1e-5)
  assert servable.served_copy(trained, drop_padding=True).drop_padding


@pytest.mark.slow
def test_run_classifier_trains_and_scores_on_the_real_tokens_of_padded_batches(tiny_model,
                                                                              tmp_path):
  vocab_file, config_file = tiny_model
  result = scripts.run_in_process(
      "run_classifier.py", "--task_name=tsv", f"--data_dir={SAMPLES_DIR / 'classification'}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path / 'output'}", "--distribution_strategy=one_device", "--seed=7",
      "--do_train", "--do_eval", "--dynamic_padding=false", "--max_seq_length=64",
      "--train_batch_size=8", "--gradient_accumulation_steps=2", "--eval_batch_size=8",
      "--num_train_epochs=1", "--learning_rate=1e-3")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "dynamic padding off, padding skipped by the layers" in result.stderr
  metrics = scripts.read_eval_results(tmp_path / "output" / "eval_results.txt")
  assert 0 <= metrics["eval_accuracy"] <= 1 and np.isfinite(metrics["eval_loss"])
