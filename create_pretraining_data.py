r"""Creates masked-LM / next-sentence pretraining TFRecords, as the original script, in parallel.

Input: text files with one sentence per line and a blank line between documents. Output:
`tf.train.Example` records with the original seven features, plus `_<output name>.stats.json`
beside the first output (a name that `--input_file=<output>*` does not match). With
`--pack_sequences`, each record instead packs up to `--max_sequences_per_pack` instances into
one `max_seq_length` row, with four more features (`tasks/pretraining/features.py`,
`packed_pretraining_feature_spec`), which `run_pretraining.py` reads.

With `--runner` and Apache Beam's other pipeline options (`pip install -r requirements-beam.txt`),
the same shards are made by a Beam pipeline instead of local processes: the same records, byte for
byte, on any runner (`tasks/pretraining/beam.py`; docs/pretraining.md has the Dataflow
command).

Example:
  python create_pretraining_data.py --input_file='corpus/*.txt' \
      --output_file=pretraining_data/part.tfrecord --num_output_shards=8 \
      --vocab_file=$BERT_DIR/vocab.txt --do_lower_case=True --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5
  # The same records from a Beam pipeline, here on this machine's cores (FnApiRunner: the
  # DirectRunner's local engine, which the DirectRunner reaches after trying to download Prism):
  python create_pretraining_data.py ...the flags above... --runner=FnApiRunner \
      --direct_running_mode=multi_processing --direct_num_workers=8
"""

import functools

from base import cli
from tasks.pretraining import data_runner
from tasks.pretraining.config import PretrainingDataConfig

if __name__ == "__main__":
  # The script runs no TensorFlow op before its workers start: they can be forked.
  cli.run_config(PretrainingDataConfig, functools.partial(data_runner.run, fork_workers=True))
