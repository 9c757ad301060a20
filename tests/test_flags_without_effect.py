"""A flag given on the command line that the run's other flags leave without effect is named in a
warning, before any work; flags that contradict each other, and values that are not finite, are
one-line errors."""

import logging

import pytest

from base import errors
from tasks.classification.config import ClassificationConfig
from tasks.pretraining.config import PretrainingConfig
from tasks.pretraining.config import PretrainingDataConfig
from tasks.squad.config import SquadConfig
from tests.conftest import SAMPLES_DIR


def _warnings(caplog, config):
  with caplog.at_level(logging.WARNING, logger="absl"):
    config.validate()
  return [record.getMessage() for record in caplog.records if "has no effect" in record.getMessage()]


def test_fine_tuning_flags_without_effect_are_named(tmp_path, tiny_model, caplog):
  vocab_file, config_file = tiny_model
  config = ClassificationConfig.from_args(
      "--task_name=tsv", f"--data_dir={SAMPLES_DIR / 'classification'}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path}", "--do_train", "--max_seq_length=32",
      "--predict_batch_size=4", "--eval_batch_size=4", "--export_version=2",
      "--train_batch_size=8", "--final_checkpoint=last")
  assert _warnings(caplog, config) == [
      "--final_checkpoint has no effect when training without --eval_every_steps: the run ends "
      "on its last checkpoint",
      "--predict_batch_size has no effect without --do_predict",
      "--eval_batch_size has no effect without --do_eval or --eval_every_steps",
      "--export_version has no effect without --export_dir"]


def test_defaults_and_used_flags_are_not_warned_about(tmp_path, tiny_model, caplog):
  vocab_file, config_file = tiny_model
  config = ClassificationConfig.from_args(
      "--task_name=tsv", f"--data_dir={SAMPLES_DIR / 'classification'}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path}", "--do_train", "--do_eval", "--max_seq_length=32",
      "--eval_batch_size=4", "--train_batch_size=8")
  assert _warnings(caplog, config) == []


def test_squad_doc_stride_beyond_a_window_and_v2_threshold_are_named(tmp_path, tiny_model,
                                                                     caplog):
  vocab_file, config_file = tiny_model
  config = SquadConfig.from_args(
      f"--train_file={SAMPLES_DIR / 'squad' / 'train.json'}", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={tmp_path}", "--do_train",
      "--max_seq_length=48", "--max_query_length=16", "--doc_stride=100",
      "--null_score_diff_threshold=1.0")
  warned = _warnings(caplog, config)
  assert len(warned) == 2
  assert warned[0].startswith("--doc_stride has no effect beyond 29, the context a window holds")
  assert warned[1] == ("--null_score_diff_threshold has no effect without "
                       "--version_2_with_negative")


def test_pretraining_eval_flags_without_evaluation_are_named(tmp_path, tiny_model, caplog):
  _, config_file = tiny_model
  config = PretrainingConfig.from_args(
      "--input_file=records.tfrecord", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path}", "--do_train", "--max_seq_length=32",
      "--eval_input_file=held_out.tfrecord", "--max_eval_steps=5")
  assert _warnings(caplog, config) == [
      "--eval_input_file has no effect without --do_eval or --eval_every_steps",
      "--max_eval_steps has no effect without --do_eval or --eval_every_steps"]


def test_data_creation_shards_of_a_list_of_outputs_is_an_error(tmp_path, tiny_model, caplog):
  vocab_file, _ = tiny_model
  common = (f"--input_file={SAMPLES_DIR / 'sample_corpus.txt'}", f"--vocab_file={vocab_file}")
  config = PretrainingDataConfig.from_args(
      *common, f"--output_file={tmp_path}/a.tfrecord,{tmp_path}/b.tfrecord",
      "--num_output_shards=2")
  with pytest.raises(errors.UsageError, match="lists several files; with --num_output_shards"):
    config.validate()
  config = PretrainingDataConfig.from_args(
      *common, f"--output_file={tmp_path}/a.tfrecord", "--max_sequences_per_pack=4")
  assert _warnings(caplog, config) == [
      "--max_sequences_per_pack has no effect without --pack_sequences"]


@pytest.mark.parametrize("flag, message", [
    ("--learning_rate=nan", "--learning_rate must be positive, got nan"),
    ("--warmup_proportion=nan", "--warmup_proportion must be in [0, 1], got nan"),
    ("--log_every_seconds=nan", "--log_every_seconds=nan: must be a finite number"),
    ("--preemption_grace_seconds=inf", "--preemption_grace_seconds=inf: must be a finite number"),
])
def test_values_that_are_not_finite_are_refused(tmp_path, tiny_model, flag, message):
  vocab_file, config_file = tiny_model
  config = ClassificationConfig.from_args(
      "--task_name=tsv", f"--data_dir={SAMPLES_DIR / 'classification'}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path}", "--do_train", "--max_seq_length=32", flag)
  with pytest.raises(errors.UsageError) as error:
    config.validate()
  assert str(error.value) == message


def test_engine_flags_without_effect_are_named(tmp_path, tiny_model, caplog):
  _, config_file = tiny_model
  config = PretrainingConfig.from_args(
      "--input_file=records.tfrecord", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path}", "--do_train", "--max_seq_length=32",
      "--distribution_strategy=multi_worker_mirrored", "--num_gpus=2", "--tpu_zone=us-c1-a",
      "--num_tpu_cores=32")
  assert _warnings(caplog, config) == [
      "--tpu_zone has no effect without a TPU (--distribution_strategy=tpu with --tpu, or "
      "--use_tpu)",
      "--num_tpu_cores has no effect without a TPU (--distribution_strategy=tpu with --tpu, or "
      "--use_tpu)",
      "--num_gpus has no effect with --distribution_strategy=multi_worker_mirrored"]
