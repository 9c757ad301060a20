#!/usr/bin/env bash
# `make demo`: the whole pipeline that exists so far, on the sample corpus the project ships.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEMO_DIR=${DEMO_DIR:-demo_output}
mkdir -p "$DEMO_DIR"

stage() { printf '\n== %s\n' "$*"; }

stage "1. Learn a WordPiece vocabulary from samples/sample_corpus.txt"
"$PYTHON" learn_vocab.py --input_file=samples/sample_corpus.txt \
  --vocab_file="$DEMO_DIR/vocab.txt" --vocab_size=3000 --min_count=2 --alsologtostderr=false
echo "wrote $DEMO_DIR/vocab.txt ($(wc -l < "$DEMO_DIR/vocab.txt") entries)"

stage "2. Tokenize the corpus with it (pure Python and in-graph)"
"$PYTHON" scripts/show_tokenization.py --input_file=samples/sample_corpus.txt \
  --vocab_file="$DEMO_DIR/vocab.txt"

stage "3. Create pretraining data (masked LM + next sentence) from the sample corpus"
"$PYTHON" create_pretraining_data.py --input_file=samples/sample_corpus.txt \
  --output_file="$DEMO_DIR/pretraining_data.tfrecord" --vocab_file="$DEMO_DIR/vocab.txt" \
  --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=1 --num_workers=2 \
  --alsologtostderr=false
"$PYTHON" -c "import json, sys; s = json.load(open(sys.argv[1])); print(
    f\"{s['instances']} instances from {s['documents']} documents, \"
    f\"{s['masked_fraction_of_tokens']:.1%} of tokens masked, \"
    f\"{s['random_next_fraction']:.1%} random next sentences\")" \
  "$DEMO_DIR/_pretraining_data.tfrecord.stats.json"

stage "4. Pretrain a tiny BERT on it until it has learned its own training data"
"$PYTHON" - "$DEMO_DIR" <<'PY'
import json, sys
vocab_size = sum(1 for _ in open(f"{sys.argv[1]}/vocab.txt", encoding="utf-8"))
json.dump({"vocab_size": vocab_size, "hidden_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 512, "max_position_embeddings": 128,
           "type_vocab_size": 2}, open(f"{sys.argv[1]}/bert_config.json", "w"), indent=2)
PY
rm -rf "$DEMO_DIR/pretraining_output"
"$PYTHON" run_pretraining.py --input_file="$DEMO_DIR/pretraining_data.tfrecord" \
  --output_dir="$DEMO_DIR/pretraining_output" --bert_config_file="$DEMO_DIR/bert_config.json" \
  --do_train --do_eval --max_seq_length=64 --max_predictions_per_seq=10 \
  --train_batch_size=32 --eval_batch_size=32 --num_train_steps=400 --num_warmup_steps=40 \
  --learning_rate=1e-3 --save_checkpoints_steps=200 \
  --distribution_strategy=one_device --alsologtostderr=false
cat "$DEMO_DIR/pretraining_output/eval_results.txt"

stage "5. Extract features of two sentences with the pretrained checkpoint"
printf '%s\n' "The keeper climbed the tower. ||| The lamp was lit." "Bees make honey." \
  > "$DEMO_DIR/features_input.txt"
"$PYTHON" extract_features.py --input_file="$DEMO_DIR/features_input.txt" \
  --output_file="$DEMO_DIR/features.jsonl" --vocab_file="$DEMO_DIR/vocab.txt" \
  --bert_config_file="$DEMO_DIR/bert_config.json" \
  --init_checkpoint="$DEMO_DIR/pretraining_output" --layers=-1,-2 --max_seq_length=64 \
  --alsologtostderr=false
"$PYTHON" -c "import json, sys
for line in open(sys.argv[1]):
  record = json.loads(line)
  tokens = [f['token'] for f in record['features']]
  first = record['features'][0]['layers'][0]
  print(record['linex_index'], ' '.join(tokens))
  print('   [CLS] layer', first['index'], len(first['values']), 'values:', first['values'][:4], '...')
" "$DEMO_DIR/features.jsonl"

stage "6. Export the pretrained checkpoint as a feature extractor and ask the export in a new process"
rm -rf "$DEMO_DIR/encoder_export"
"$PYTHON" export_model.py --vocab_file="$DEMO_DIR/vocab.txt" \
  --bert_config_file="$DEMO_DIR/bert_config.json" \
  --init_checkpoint="$DEMO_DIR/pretraining_output" --max_seq_length=64 --pooling=mean \
  --export_dir="$DEMO_DIR/encoder_export" --export_version=1 --alsologtostderr=false
ls "$DEMO_DIR/encoder_export/1"
"$PYTHON" - "$DEMO_DIR/encoder_export/1" <<'PY'
import sys
import numpy as np
import base  # noqa: F401  (imports TensorFlow without its start-up lines)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)
model = tf.saved_model.load(sys.argv[1])
sentences = ["The lamp burned paraffin until the island was connected to the mainland grid.",
             "The lamp kept burning because she covered the openings with sailcloth.",
             "Sourdough bread needs only flour, water and salt."]
vectors = model.signatures["embed"](text_a=tf.constant(sentences),
                                    text_b=tf.constant([""] * 3))["embedding"].numpy()
vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
print(f"  mean-pooled embeddings, {vectors.shape[1]} dimensions; cosine similarity of")
for i, j in ((0, 1), (0, 2)):
  print(f"    {sentences[i]!r}\n    {sentences[j]!r}: {vectors[i] @ vectors[j]:.3f}")
outputs = model.signatures["serving_default"](text_a=tf.constant(sentences[:1]),
                                              text_b=tf.constant([""]))
print("  serving_default outputs for the first sentence: " + ", ".join(
    f"{name} {tuple(value.shape)}" for name, value in sorted(outputs.items())))
PY

stage "7. Fine-tune the pretrained model to classify the topic of a sentence (nature, food, craft)"
rm -rf "$DEMO_DIR/classifier_output"
echo "Its settings are kept in a flag file, $DEMO_DIR/classifier.flags (--flagfile):"
cat > "$DEMO_DIR/classifier.flags" <<FLAGS
--task_name=tsv
--data_dir=samples/classification
--text_a_column=sentence
--label_column=label
--vocab_file=$DEMO_DIR/vocab.txt
--bert_config_file=$DEMO_DIR/bert_config.json
--max_seq_length=64
--distribution_strategy=one_device
FLAGS
sed 's/^/  /' "$DEMO_DIR/classifier.flags"
"$PYTHON" run_classifier.py --flagfile="$DEMO_DIR/classifier.flags" \
  --init_checkpoint="$DEMO_DIR/pretraining_output" --output_dir="$DEMO_DIR/classifier_output" \
  --do_train --do_eval --do_predict --train_batch_size=8 --num_train_epochs=10 \
  --learning_rate=5e-4 --log_every_steps=26 --eval_every_steps=13 --alsologtostderr=false
"$PYTHON" - "$DEMO_DIR/classifier_output" <<'PY'
import json, sys
output = sys.argv[1]
print("Evaluated every 13 steps while training (eval_history.jsonl):")
for line in open(f"{output}/eval_history.jsonl"):
  entry = json.loads(line)
  print(f"  step {entry['step']:3}: eval_accuracy {entry['metrics']['eval_accuracy']:.3f}, "
        f"eval_loss {entry['metrics']['eval_loss']:.3f}")
best = json.load(open(f"{output}/best/best.json"))
print(f"Best checkpoint kept: best/{best['checkpoint']} ({best['metric']} {best['value']:.3f}); "
      "the final evaluation and predictions use it:")
PY
cat "$DEMO_DIR/classifier_output/eval_results.txt"
"$PYTHON" - "$DEMO_DIR/classifier_output" <<'PY'
import sys
output = sys.argv[1]
labels = open(f"{output}/label_list.txt").read().split()
sentences = [line.rstrip("\n") for line in open("samples/classification/test.tsv")][1:]
for sentence, line in zip(sentences, open(f"{output}/test_results.tsv")):
  probabilities = [float(x) for x in line.split("\t")]
  best = max(range(len(labels)), key=probabilities.__getitem__)
  print(f"  {labels[best]:7} ({probabilities[best]:.2f})  {sentence}")
PY

stage "8. Fine-tune it to tag people, places and organisations (CoNLL format, IOB2)"
rm -rf "$DEMO_DIR/ner_output"
"$PYTHON" run_ner.py --data_dir=samples/ner --vocab_file="$DEMO_DIR/vocab.txt" \
  --bert_config_file="$DEMO_DIR/bert_config.json" \
  --init_checkpoint="$DEMO_DIR/pretraining_output" --output_dir="$DEMO_DIR/ner_output" \
  --do_train --do_eval --do_predict --max_seq_length=32 --train_batch_size=8 \
  --num_train_epochs=40 --learning_rate=1e-3 \
  --distribution_strategy=one_device --alsologtostderr=false
grep -E "^(precision|recall|f1|token_accuracy) " "$DEMO_DIR/ner_output/eval_results.txt"
echo "predictions.txt (word, gold tag, predicted tag):"
sed 's/^/  /' "$DEMO_DIR/ner_output/predictions.txt"

stage "9. Fine-tune it to answer questions about the corpus (SQuAD v2.0 format, some unanswerable), export it, ask the export"
rm -rf "$DEMO_DIR/squad_output"
"$PYTHON" run_squad.py --train_file=samples/squad/train.json \
  --predict_file=samples/squad/dev.json --version_2_with_negative \
  --vocab_file="$DEMO_DIR/vocab.txt" --bert_config_file="$DEMO_DIR/bert_config.json" \
  --init_checkpoint="$DEMO_DIR/pretraining_output" --output_dir="$DEMO_DIR/squad_output" \
  --do_train --do_predict --max_seq_length=64 --doc_stride=24 --max_query_length=16 \
  --train_batch_size=8 --num_train_epochs=150 --learning_rate=5e-4 \
  --distribution_strategy=one_device --alsologtostderr=false
"$PYTHON" - "$DEMO_DIR/squad_output" <<'PY'
import json, sys
output = sys.argv[1]
results = json.load(open(f"{output}/eval_results.json"))
print("  " + ", ".join(f"{key} {results[key]:.1f}" for key in
                       ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1")))
predictions = json.load(open(f"{output}/predictions.json"))
for article in json.load(open("samples/squad/dev.json"))["data"]:
  for paragraph in article["paragraphs"]:
    for qa in paragraph["qas"]:
      gold = "(no answer)" if qa["is_impossible"] else qa["answers"][0]["text"]
      answer = predictions[qa["id"]] or "(no answer)"
      print(f"  {qa['question']}\n      predicted: {answer}   gold: {gold}")
PY
echo "Exported, then asked in a new process (question and context in, answer and offsets out):"
rm -rf "$DEMO_DIR/squad_export"
"$PYTHON" run_squad.py --vocab_file="$DEMO_DIR/vocab.txt" \
  --bert_config_file="$DEMO_DIR/bert_config.json" --output_dir="$DEMO_DIR/squad_output" \
  --version_2_with_negative --max_seq_length=64 --max_query_length=16 \
  --export_dir="$DEMO_DIR/squad_export" --export_version=1 \
  --distribution_strategy=one_device --alsologtostderr=false
"$PYTHON" - "$DEMO_DIR/squad_export/1" <<'PY'
import sys
import base  # noqa: F401  (imports TensorFlow without its start-up lines)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)
model = tf.saved_model.load(sys.argv[1])
questions = ["Who was the first keeper?", "What do older workers collect?"]
contexts = ["Its first keeper was a retired ship's carpenter named Tomas Ekberg.",
            "Older workers leave the hive to collect nectar, pollen and water."]
outputs = model.signatures["serving_default"](question=tf.constant(questions),
                                              context=tf.constant(contexts))
for question, context, answer, start, end in zip(
    questions, contexts, outputs["answer"].numpy(), outputs["answer_start"].numpy(),
    outputs["answer_end"].numpy()):
  answer = answer.decode() or "(no answer)"
  print(f"  {question}\n      context: {context}\n      answer: {answer}   "
        f"(characters {start}-{end} of the context)")
PY

stage "10. Fine-tune it to pick the sentence that continues a context (multiple choice, JSON lines; batches padded to 64, whose padding the layers skip), export it, ask the export"
rm -rf "$DEMO_DIR/multiple_choice_output" "$DEMO_DIR/multiple_choice_export"
"$PYTHON" run_multiple_choice.py --task_name=jsonl --data_dir=samples/multiple_choice \
  --vocab_file="$DEMO_DIR/vocab.txt" --bert_config_file="$DEMO_DIR/bert_config.json" \
  --init_checkpoint="$DEMO_DIR/pretraining_output" \
  --output_dir="$DEMO_DIR/multiple_choice_output" --do_train --do_eval --do_predict \
  --max_seq_length=64 --train_batch_size=8 --num_train_epochs=10 --learning_rate=5e-4 \
  --dynamic_padding=false \
  --export_dir="$DEMO_DIR/multiple_choice_export" --export_version=1 \
  --distribution_strategy=one_device --alsologtostderr=false
cat "$DEMO_DIR/multiple_choice_output/eval_results.txt"
"$PYTHON" - "$DEMO_DIR/multiple_choice_output" <<'PY'
import json, sys
tests = [json.loads(line) for line in open("samples/multiple_choice/test.jsonl")]
for test, line in zip(tests, open(f"{sys.argv[1]}/predictions.jsonl")):
  prediction = json.loads(line)
  choice = prediction["choice"]
  print(f"  {test['context']}\n      -> ({prediction['probabilities'][choice]:.2f}) "
        f"{test['choices'][choice]}")
PY
echo "Asked in a new process (a context and its choices in, the choice and its probabilities out):"
"$PYTHON" - "$DEMO_DIR/multiple_choice_export/1" <<'PY'
import sys
import base  # noqa: F401  (imports TensorFlow without its start-up lines)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)
model = tf.saved_model.load(sys.argv[1])
context = "The keeper climbed the stairs to light the lamp."
choices = ["The beam swept across the dark water all night.", "She fed the starter with flour.",
           "The players shook hands over the board."]
outputs = model.signatures["serving_default"](context=tf.constant([context]),
                                              choices=tf.constant([choices]))
print(f"  {context}")
for choice, probability in zip(choices, outputs["probabilities"].numpy()[0]):
  print(f"      {probability:.2f}  {choice}")
print(f"      chosen: {int(outputs['choice'].numpy()[0])}")
PY

stage "11. Export the topic classifier for TensorFlow Serving, in float32 and in bfloat16, and ask the exports in a new process (its threads pinned one per CPU)"
rm -rf "$DEMO_DIR/export"
"$PYTHON" run_classifier.py --flagfile="$DEMO_DIR/classifier.flags" \
  --output_dir="$DEMO_DIR/classifier_output" --export_dir="$DEMO_DIR/export" --export_version=1 \
  --alsologtostderr=false
ls "$DEMO_DIR/export/1"
"$PYTHON" - "$DEMO_DIR/export/1" <<'PY'
import sys
import base  # noqa: F401  (imports TensorFlow without its start-up lines)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)
from serving import thread_affinity
model = tf.saved_model.load(sys.argv[1])
placement = thread_affinity.pin_intra_op_threads()  # a serving process: docs/serving.md
print(f"  TensorFlow's {len(placement)} intra-op threads pinned to CPUs "
      f"{', '.join(str(cpu) for cpu in placement.values())}")
sentences = ["The bees flew over the river.", "She baked bread with honey.",
             "The carpenter cut the spruce."]
outputs = model.signatures["serving_default"](text_a=tf.constant(sentences))
for sentence, label, probabilities in zip(sentences, outputs["label"].numpy(),
                                          outputs["probabilities"].numpy()):
  print(f"  {label.decode():7} ({probabilities.max():.2f})  {sentence}")
PY
echo "The same checkpoint exported to compute in bfloat16 (version 2; weights stored in bfloat16,"
echo "outputs float32), asked the same in a new process:"
"$PYTHON" run_classifier.py --flagfile="$DEMO_DIR/classifier.flags" \
  --output_dir="$DEMO_DIR/classifier_output" --export_dir="$DEMO_DIR/export" --export_version=2 \
  --export_precision=bfloat16 --allow_emulated_bfloat16 --alsologtostderr=false
"$PYTHON" - "$DEMO_DIR/export" <<'PY'
import sys
import base  # noqa: F401  (imports TensorFlow without its start-up lines)
from base import cpu_features
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)
sentences = tf.constant(["The bees flew over the river.", "She baked bread with honey.",
                         "The carpenter cut the spruce."])
float32, bfloat16 = (tf.saved_model.load(f"{sys.argv[1]}/{version}").signatures[
    "serving_default"](text_a=sentences) for version in (1, 2))
same = (float32["label"].numpy() == bfloat16["label"].numpy()).all()
difference = np.abs(float32["probabilities"].numpy() - bfloat16["probabilities"].numpy()).max()
print(f"  labels {'the same' if same else 'DIFFERENT'}, probabilities within {difference:.4f} of "
      f"float32's ({bfloat16['probabilities'].dtype.name}); this processor "
      f"{'has' if cpu_features.has_bfloat16_dot_product() else 'emulates'} bfloat16 dot products")
sys.exit(0 if same else 1)
PY

stage "12. Bad input stops a run before any work; a run killed with SIGKILL resumes; SIGTERM saves, then resumes"
"$PYTHON" - "$DEMO_DIR" <<'PY'
import json, sys
config = json.load(open(f"{sys.argv[1]}/bert_config.json"))
json.dump(dict(config, hidden_act="relu"), open(f"{sys.argv[1]}/bert_config_relu.json", "w"))
PY
pretraining_flags=(--input_file="$DEMO_DIR/pretraining_data.tfrecord"
  --output_dir="$DEMO_DIR/pretraining_output" --do_train --max_seq_length=64
  --max_predictions_per_seq=10 --train_batch_size=32 --num_train_steps=800 --num_warmup_steps=40
  --learning_rate=1e-3 --save_checkpoints_steps=100 --distribution_strategy=one_device
  --alsologtostderr=false)
echo "Resuming the pretraining run with another hidden_act than it was trained with:"
{ "$PYTHON" run_pretraining.py "${pretraining_flags[@]}" \
    --bert_config_file="$DEMO_DIR/bert_config_relu.json" 2>&1 || true; } | tail -n 1
echo "Continuing it to step 800, killed with SIGKILL after 15 s:"
"$PYTHON" run_pretraining.py "${pretraining_flags[@]}" \
  --bert_config_file="$DEMO_DIR/bert_config.json" 2>/dev/null &
sleep 15
kill -9 $! 2>/dev/null || true
wait $! 2>/dev/null || true
echo "  left behind: $(cd "$DEMO_DIR/pretraining_output" && ls -A | tr '\n' ' ')"
"$PYTHON" run_pretraining.py "${pretraining_flags[@]}" \
  --bert_config_file="$DEMO_DIR/bert_config.json" 2>&1 | { grep -E "taking over|Resum|step 800" || true; } \
  | sed -e 's/^.*\] /  /'
echo "  after the rerun: $(cd "$DEMO_DIR/pretraining_output" && ls -A | tr '\n' ' ')"
echo "Training on to step 1000, sent SIGTERM (what a preempted VM or an evicted pod gets) once it trains:"
"$PYTHON" run_pretraining.py "${pretraining_flags[@]}" --num_train_steps=1000 \
  --bert_config_file="$DEMO_DIR/bert_config.json" 2> "$DEMO_DIR/preempted.log" &
preempted=$!
until grep -q "step [0-9]*/1000" "$DEMO_DIR/preempted.log" || ! kill -0 $preempted 2>/dev/null; do
  sleep 0.2
done
kill -TERM $preempted 2>/dev/null || true
status=0
wait $preempted || status=$?
echo "  exit status $status: $(tail -n 1 "$DEMO_DIR/preempted.log")"
"$PYTHON" run_pretraining.py "${pretraining_flags[@]}" --num_train_steps=1000 \
  --bert_config_file="$DEMO_DIR/bert_config.json" 2>&1 | { grep -E "Resuming at|step 1000/" || true; } \
  | sed -e 's/^.*\] /  /'

stage "13. Pack several instances into each row (no compute on padding) and pretrain on at length 128 from the checkpoint, as the original's phase 2"
"$PYTHON" create_pretraining_data.py --input_file=samples/sample_corpus.txt \
  --output_file="$DEMO_DIR/packed_data.tfrecord" --vocab_file="$DEMO_DIR/vocab.txt" \
  --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=2 --num_workers=2 \
  --pack_sequences --alsologtostderr=false
"$PYTHON" create_pretraining_data.py --input_file=samples/sample_corpus.txt \
  --output_file="$DEMO_DIR/long_eval_data.tfrecord" --vocab_file="$DEMO_DIR/vocab.txt" \
  --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=1 --random_seed=7 \
  --num_workers=2 --alsologtostderr=false
"$PYTHON" -c "import json, sys; s = json.load(open(sys.argv[1])); print(
    f\"{s['instances']} instances in {s['packs']} rows of 128 ({s['instances_per_pack']:.2f} per row); \"
    f\"padding {s['padding_fraction']:.1%} of positions unpacked, {s['packed_padding_fraction']:.1%} packed\")" \
  "$DEMO_DIR/_packed_data.tfrecord.stats.json"
rm -rf "$DEMO_DIR/phase2_output"
"$PYTHON" run_pretraining.py --input_file="$DEMO_DIR/packed_data.tfrecord" \
  --eval_input_file="$DEMO_DIR/long_eval_data.tfrecord" \
  --init_checkpoint="$DEMO_DIR/pretraining_output" --output_dir="$DEMO_DIR/phase2_output" \
  --bert_config_file="$DEMO_DIR/bert_config.json" --do_train --do_eval --max_seq_length=128 \
  --max_predictions_per_seq=20 --train_batch_size=16 --eval_batch_size=32 \
  --num_train_steps=60 --num_warmup_steps=6 --learning_rate=5e-4 \
  --distribution_strategy=one_device --alsologtostderr=false
echo "Evaluated on unpacked records of length 128:"
sed 's/^/  /' "$DEMO_DIR/phase2_output/eval_results.txt"

stage "14. Convert the pretrained checkpoint to a keras-hub preset and a TF Model Garden checkpoint, and back"
rm -rf "$DEMO_DIR/converted"
for target in keras_hub model_garden; do
  "$PYTHON" convert_checkpoint.py --direction="bert_to_$target" \
    --input_dir="$DEMO_DIR/pretraining_output" --vocab_file="$DEMO_DIR/vocab.txt" \
    --output_dir="$DEMO_DIR/converted/$target" --alsologtostderr=false
  "$PYTHON" convert_checkpoint.py --direction="${target}_to_bert" \
    --input_dir="$DEMO_DIR/converted/$target" --output_dir="$DEMO_DIR/converted/${target}_back" \
    --alsologtostderr=false
  echo "$target: $(cd "$DEMO_DIR/converted/$target" && find . -type f | sort | tr '\n' ' ')"
done
"$PYTHON" - "$DEMO_DIR" <<'PY'
import sys
import numpy as np
from modeling import checkpoint_io
trained = checkpoint_io.read_checkpoint(f"{sys.argv[1]}/pretraining_output")
for target in ("keras_hub", "model_garden"):
  back = checkpoint_io.read_checkpoint(f"{sys.argv[1]}/converted/{target}_back/bert_model.ckpt")
  same = all(np.asarray(value).tobytes() == trained[name].tobytes() for name, value in back.items())
  heads = sorted({name.split("/")[1] for name in back if name.startswith("cls/")})
  print(f"{target} and back: {len(back)} tensors, {'all' if same else 'NOT all'} bit-identical "
        f"to the run's (heads kept: {', '.join(heads) or 'none'})")
PY

stage "15. Hand the topic classifier to HuggingFace and back, serve the converted model without training; export the encoder in TF Hub's interface"
rm -rf "$DEMO_DIR/hf" "$DEMO_DIR/tf_hub"
"$PYTHON" convert_checkpoint.py --direction=bert_to_hf --input_dir="$DEMO_DIR/classifier_output" \
  --vocab_file="$DEMO_DIR/vocab.txt" --hf_architecture=BertForSequenceClassification \
  --output_dir="$DEMO_DIR/hf/classifier" --alsologtostderr=false
"$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1])); print(
    f\"HuggingFace model: {c['architectures'][0]}, id2label {c['id2label']}, files:\",
    ' '.join(sorted(__import__('os').listdir(sys.argv[2]))))" \
  "$DEMO_DIR/hf/classifier/config.json" "$DEMO_DIR/hf/classifier"
"$PYTHON" convert_checkpoint.py --direction=hf_to_bert --input_dir="$DEMO_DIR/hf/classifier" \
  --output_dir="$DEMO_DIR/hf/classifier_back" --alsologtostderr=false
echo "Back in the original layout: $(cd "$DEMO_DIR/hf/classifier_back" && ls | tr '\n' ' ')"
"$PYTHON" run_classifier.py --task_name=tsv --data_dir=samples/classification --do_predict \
  --init_checkpoint="$DEMO_DIR/hf/classifier_back/bert_model.ckpt" --max_seq_length=64 \
  --output_dir="$DEMO_DIR/hf/classifier_run" --export_dir="$DEMO_DIR/hf/classifier_export" \
  --export_version=1 --distribution_strategy=one_device --alsologtostderr=false
"$PYTHON" - "$DEMO_DIR" <<'PY'
import sys
import numpy as np
import base  # noqa: F401  (imports TensorFlow without its start-up lines)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)
from modeling import checkpoint_io
demo = sys.argv[1]
run = checkpoint_io.read_checkpoint(f"{demo}/classifier_output")
back = checkpoint_io.read_checkpoint(f"{demo}/hf/classifier_back/bert_model.ckpt")
same = all(np.asarray(value).tobytes() == run[name].tobytes() for name, value in back.items())
print(f"{len(back)} tensors, {'all' if same else 'NOT all'} bit-identical to the run's last "
      "checkpoint. Served with no training (labels from label_list.txt), beside stage 11's "
      "export of the run's best checkpoint:")
sentences = ["The bees flew over the river.", "She baked bread with honey.",
             "The carpenter cut the spruce."]
answers = [tf.saved_model.load(path).signatures["serving_default"](text_a=tf.constant(sentences))
           for path in (f"{demo}/hf/classifier_export/1", f"{demo}/export/1")]
for i, sentence in enumerate(sentences):
  print("  " + "   ".join(f"{a['label'][i].numpy().decode():7} ({a['probabilities'][i].numpy().max():.2f})"
                          for a in answers) + f"   {sentence}")
PY
"$PYTHON" convert_checkpoint.py --direction=bert_to_tf_hub \
  --input_dir="$DEMO_DIR/pretraining_output" --vocab_file="$DEMO_DIR/vocab.txt" \
  --output_dir="$DEMO_DIR/tf_hub" --alsologtostderr=false
"$PYTHON" - "$DEMO_DIR/tf_hub" <<'PY'
import sys
import base  # noqa: F401  (imports TensorFlow without its start-up lines)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the preprocessing's tokenizer ops, as TF Hub's own)
preprocess = tf.saved_model.load(f"{sys.argv[1]}/preprocessing")
encoder = tf.saved_model.load(f"{sys.argv[1]}/encoder")
inputs = preprocess(tf.constant(["The lamp burned paraffin.", "Sourdough needs salt."]))
outputs = encoder(inputs)
print("TF Hub BERT interface, loaded with tf.saved_model.load alone: inputs " + ", ".join(
    f"{name} {tuple(value.shape)}" for name, value in sorted(inputs.items())) + "; outputs "
    f"pooled_output {tuple(outputs['pooled_output'].shape)}, sequence_output "
    f"{tuple(outputs['sequence_output'].shape)}, encoder_outputs {len(outputs['encoder_outputs'])} "
    f"layers; do_lower_case {bool(encoder.do_lower_case.numpy())}")
PY

stage "16. Create the data of stage 3 again as an Apache Beam pipeline (needs requirements-beam.txt)"
if "$PYTHON" -c "import apache_beam" 2>/dev/null; then
  # FnApiRunner is the DirectRunner's local engine; the DirectRunner itself first tries to
  # download Beam's Prism runner.
  "$PYTHON" create_pretraining_data.py --input_file=samples/sample_corpus.txt \
    --output_file="$DEMO_DIR/beam_pretraining_data.tfrecord" --vocab_file="$DEMO_DIR/vocab.txt" \
    --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=1 \
    --runner=FnApiRunner --direct_running_mode=multi_processing --direct_num_workers=2 \
    --alsologtostderr=false 2>"$DEMO_DIR/beam.log" || { tail -5 "$DEMO_DIR/beam.log"; exit 1; }
  if cmp -s "$DEMO_DIR/pretraining_data.tfrecord" "$DEMO_DIR/beam_pretraining_data.tfrecord"; then
    echo "the pipeline's records are stage 3's, byte for byte ($(wc -c < "$DEMO_DIR/beam_pretraining_data.tfrecord") bytes)"
  else
    echo "the pipeline's records differ from stage 3's"; exit 1
  fi
else
  echo "skipped: apache-beam is not installed (.venv/bin/pip install -r requirements-beam.txt)"
fi

stage "17. The same from Python: fine-tune a classifier and a tagger back to back in one process, ask the export (examples/python_api.py)"
rm -rf "$DEMO_DIR/python_api"
PYTHONPATH=. "$PYTHON" examples/python_api.py 2>"$DEMO_DIR/python_api.log" || { tail -5 "$DEMO_DIR/python_api.log"; exit 1; }
