r"""Masked-LM and next-sentence pretraining, as the original `run_pretraining.py`.

Reads the TFRecords of `create_pretraining_data.py`, trains on one device, several GPUs, several
hosts or a TPU through one custom training loop, checkpoints in the original variable names into
`--output_dir` and resumes from there, and writes `eval_results.txt` with `--do_eval`.

Example:
  python run_pretraining.py --input_file='data/*.tfrecord' --output_dir=pretraining_output \
      --do_train --do_eval --bert_config_file=$BERT_DIR/bert_config.json \
      --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
      --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5
"""

from absl import flags
from absl import logging

from base import cli
from base import errors
from data import file_patterns
from data import schemas
from modeling import bert_config as bert_config_lib
from modeling import optimization
from training import distribution
from training import engine
from training import flags as training_flags
from training import input_pipeline
from training import model_inputs
from training import pretraining_task

FLAGS = flags.FLAGS

training_flags.define_all()
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to train.")
flags.DEFINE_string("input_file", None,
                    "Comma-separated globs of TFRecords from create_pretraining_data.py.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked-LM predictions per record.")
flags.DEFINE_integer("max_sequences_per_pack", None,
                     "Packed records (create_pretraining_data.py --pack_sequences, detected from "
                     "their features): the most instances a row may hold; records packing more "
                     "are refused before the first step. Default: what the records hold.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on the same files after training.")
flags.DEFINE_integer("train_batch_size", 32, "Examples per optimizer step, over all replicas.")
flags.DEFINE_integer("eval_batch_size", 8, "Examples per evaluation step, over all replicas.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of AdamWeightDecay.")
flags.DEFINE_integer("num_train_steps", 100000, "Optimizer steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches.")
training_flags.define_evaluation_flags(with_best_checkpoint=False)
flags.DEFINE_string("eval_input_file", None, "Held-out pretraining records (glob or "
                    "comma-separated) that --do_eval and --eval_every_steps evaluate on; default "
                    "--input_file, as the original's --do_eval.")
flags.mark_flags_as_required(["bert_config_file", "input_file", "output_dir"])


def check_flags(bert_config):
  if not FLAGS.do_train and not FLAGS.do_eval:
    raise errors.UsageError("at least one of --do_train or --do_eval must be true")
  model_inputs.check_max_seq_length(FLAGS.max_seq_length, bert_config, FLAGS.bert_config_file)
  training_flags.check_positive(FLAGS, ("max_predictions_per_seq", "train_batch_size",
                                        "eval_batch_size", "num_train_steps", "learning_rate",
                                        "max_sequences_per_pack"))
  if FLAGS.num_warmup_steps < 0:
    raise errors.UsageError(f"--num_warmup_steps must not be negative, got {FLAGS.num_warmup_steps}")
  training_flags.check_starting_weights(FLAGS, bert_config)


def read_layout(patterns, flag_name):
  """The `RecordLayout` of the records of a file flag, checked against the run's flags (None
  when no file holds a record: `input_pipeline.input_fn_from_flags` reports it)."""
  layout, path = pretraining_task.read_record_layout(
      file_patterns.expand_globs(patterns, flag_name),
      input_pipeline.COMPRESSION_TYPES[FLAGS.input_compression])
  if layout is not None:
    pretraining_task.check_record_layout(layout, path, FLAGS.max_seq_length,
                                         FLAGS.max_predictions_per_seq,
                                         FLAGS.max_sequences_per_pack)
  return layout


def records_input_fn(patterns, flag_name, layout, packed_model, batch_size, is_training, **kwargs):
  """`input_pipeline.input_fn_from_flags` for records of `layout`; unpacked records feed a
  packed model as rows of one instance."""
  feature_spec = (layout.feature_spec() if layout is not None else
                  schemas.pretraining_feature_spec(FLAGS.max_seq_length,
                                                   FLAGS.max_predictions_per_seq))
  unpacked_for_packed = packed_model and not (layout is not None and layout.packed)
  return input_pipeline.input_fn_from_flags(
      patterns, feature_spec, batch_size, is_training, flag_name=flag_name,
      compression=FLAGS.input_compression,
      example_fn=pretraining_task.as_packed_rows if unpacked_for_packed else None, **kwargs)


def main(argv):
  del argv
  bert_config = bert_config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
  check_flags(bert_config)
  eval_flag = "eval_input_file" if FLAGS.eval_input_file else "input_file"
  eval_patterns = FLAGS.eval_input_file or FLAGS.input_file
  train_layout = read_layout(FLAGS.input_file, "input_file")
  eval_layout = read_layout(eval_patterns, eval_flag)
  packed = any(layout is not None and layout.packed for layout in (train_layout, eval_layout))
  train_input_fn, files = records_input_fn(FLAGS.input_file, "input_file", train_layout, packed,
                                           FLAGS.train_batch_size, is_training=True,
                                           seed=FLAGS.seed)
  pretraining_task.check_ids_within_vocab(
      files[0], bert_config.vocab_size,
      compression_type=input_pipeline.COMPRESSION_TYPES[FLAGS.input_compression])
  logging.info("%d input file(s), e.g. %s%s", len(files), files[0],
               f"; packed rows of up to {train_layout.max_sequences_per_pack} instances"
               if train_layout is not None and train_layout.packed else "")
  evaluation_config = training_flags.evaluation_config_from_flags(
      FLAGS, metric_names=(), default_metric=None, eval_data=eval_patterns)

  strategy = distribution.strategy_from_flags(FLAGS)
  run_config = training_flags.run_config_from_flags(
      FLAGS, FLAGS.num_train_steps, FLAGS.train_batch_size, FLAGS.eval_batch_size)
  trainer = engine.Trainer(
      strategy, pretraining_task.PretrainingTask(bert_config, packed=packed), run_config,
      lambda: optimization.create_optimizer(FLAGS.learning_rate, FLAGS.num_train_steps,
                                            FLAGS.num_warmup_steps, FLAGS.optimizer))
  eval_input_fn = None
  if FLAGS.do_eval or evaluation_config is not None:
    eval_input_fn, _ = records_input_fn(eval_patterns, eval_flag, eval_layout, packed,
                                        FLAGS.eval_batch_size, is_training=False)
  if FLAGS.do_train:
    trainer.train(train_input_fn, evaluation_config,
                  lambda: trainer.compute_eval_metrics(eval_input_fn, FLAGS.max_eval_steps))
  if FLAGS.do_eval:
    trainer.evaluate(eval_input_fn, FLAGS.max_eval_steps)


if __name__ == "__main__":
  cli.run(main)
