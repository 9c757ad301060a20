"""Fine-tune and evaluate from Python, then ask the export: the Python API on the files of
`make demo` (run it after the demo, from the repository's root; the demo's last stage does)."""

import base  # noqa: F401 (first: TensorFlow then starts without its start-up lines)
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the export's tokenizer ops)

from tasks import runner
from tasks.classification.config import ClassificationConfig
from tasks.ner.config import NerConfig

model_files = dict(vocab_file="demo_output/vocab.txt",
                   bert_config_file="demo_output/bert_config.json",
                   init_checkpoint="demo_output/pretraining_output",
                   max_seq_length=64, distribution_strategy="one_device", seed=1)

classifier = runner.run(ClassificationConfig(
    task_name="tsv", data_dir="samples/classification", do_train=True, do_eval=True,
    train_batch_size=8, num_train_epochs=10, learning_rate=5e-4,
    output_dir="demo_output/python_api/classifier", export_dir="demo_output/python_api/export",
    **model_files))
print(f"classifier: eval_accuracy {classifier.metrics['eval_accuracy']:.3f}")

tagger = runner.run(NerConfig(
    data_dir="samples/ner", do_train=True, do_eval=True, train_batch_size=8,
    num_train_epochs=20, learning_rate=1e-3, output_dir="demo_output/python_api/ner",
    **model_files))
print(f"tagger: f1 {tagger.metrics['f1']:.3f}")

export = tf.saved_model.load(classifier.export_path)
answer = export.signatures["serving_default"](
    text_a=tf.constant(["The river runs fast after the snow melts."]))
print("export:", answer["label"].numpy()[0].decode(), answer["probabilities"].numpy()[0].round(3))
