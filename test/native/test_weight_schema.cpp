// The weight schema (models/weight_schema.h) and the binding and sizing that read it (loader/weights.h):
//   - the dense schema of every fixture checkpoint binds that checkpoint with nothing left unused, and names exactly
//     the tensors its files hold (read through the safetensors loader); every tensor bound has the file's shape and
//     data (views for matrices, fp32 copies for vectors), the totals add up, progress comes once per layer, and
//     shape_weights gives the same shapes before any file is read;
//   - tensors under a skipped prefix (a vision tower, an MTP head) are counted, not bound, and not "unused";
//   - each refusal of a checkpoint that does not match its config keeps its code and message, word for word (the
//     strings below are what the binder said before the schema existed);
//   - Weights refuses a role its schema never declared, a layer it does not have, a matrix asked as a vector.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "dtype.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "loader/weights.h"
#include "status.h"
#include "models/dense_model.h"
#include "models/registry.h"
#include "models/weight_schema.h"

using namespace vt;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = "test/fixtures";  // the tests run from the repository root

// ---- checkpoints edited and written back ------------------------------------------------------------------------
struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::vector<StTensor> read_tensors(const std::string &dir) {
  const auto ck = Checkpoint::open(dir);
  std::vector<StTensor> out;
  for (const auto &[name, t] : ck->tensors())
    out.push_back({name, t.dtype_name, t.shape, std::string(static_cast<const char *>(t.data), t.nbytes)});
  std::sort(out.begin(), out.end(), [](const StTensor &a, const StTensor &b) { return a.name < b.name; });
  return out;
}

int64_t elems(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One model.safetensors as the safetensors library lays it out: header padded with spaces to 8 bytes, tensors by
// falling element size (so each stays aligned), no gaps.
void write_checkpoint(const std::string &dir, std::vector<StTensor> ts) {
  auto elem = [](const StTensor &t) { return elems(t.shape) ? int64_t(t.bytes.size()) / elems(t.shape) : 1; };
  std::stable_sort(ts.begin(), ts.end(), [&](const StTensor &a, const StTensor &b) { return elem(a) > elem(b); });
  std::string h = "{", data;
  for (const StTensor &t : ts) {
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    h += (h.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" +
         shape + "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
         std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  fs::create_directories(dir);
  std::ofstream f(dir + "/model.safetensors", std::ios::binary);
  const uint64_t n = h.size();
  f.write(reinterpret_cast<const char *>(&n), 8);
  f << h << data;
}

StTensor *find(std::vector<StTensor> &ts, const std::string &name) {
  for (StTensor &t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

void drop(std::vector<StTensor> &ts, const std::string &name) {
  ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const StTensor &t) { return t.name == name; }), ts.end());
}

StTensor f32(const std::string &name, std::vector<int64_t> shape) {
  return {name, "F32", shape, std::string(size_t(elems(shape)) * 4, '\0')};
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/vt-weight-schema-XXXXXX";
    if (const char *d = mkdtemp(tmpl)) path_ = d;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  // A fresh folder for one edited checkpoint.
  std::string next() { return path_ + "/" + std::to_string(++n_); }

 private:
  std::string path_;
  int n_ = 0;
};

TempDir g_tmp;

// ---- binding ------------------------------------------------------------------------------------------------------
Weights bind(const ModelConfig &c, const Checkpoint &ck, const std::function<void(int, int)> &progress = nullptr) {
  return bind_weights(c, model_entry(c).schema(c), ck, progress);
}

std::string code(vt_status s) {
  switch (s) {
    case VT_ERR_BAD_CHECKPOINT: return "ERR_BAD_CHECKPOINT";
    case VT_ERR_SHAPE_MISMATCH: return "ERR_SHAPE_MISMATCH";
    case VT_ERR_UNSUPPORTED_DTYPE: return "ERR_UNSUPPORTED_DTYPE";
    default: return "status " + std::to_string(int(s));
  }
}

// "ok", or the refusal as "CODE: message".
std::string outcome(const ModelConfig &c, const std::vector<StTensor> &ts) {
  const std::string dir = g_tmp.next();
  write_checkpoint(dir, ts);
  try {
    const auto ck = Checkpoint::open(dir);
    bind(c, *ck);
    return "ok";
  } catch (const Error &e) {
    return code(e.status()) + ": " + e.what();
  }
}

void refused(const std::string &what, const ModelConfig &c, const std::vector<StTensor> &ts, const std::string &want) {
  const std::string got = outcome(c, ts);
  record(got == want, what, "got `" + got + "`, want `" + want + "`");
}

bool ends_with(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string joined(const std::set<std::string> &names) {
  std::string out;
  for (const std::string &n : names) out += (out.empty() ? "" : " ") + n;
  return out;
}

template <class F>
bool logic_error_from(F f) {
  try {
    f();
  } catch (const std::logic_error &) {
    return true;
  }
  return false;
}

}  // namespace

// Every fixture checkpoint against its own schema: what the files hold is the reference.
void test_fixtures() {
  int checked = 0;
  for (const auto &entry : fs::directory_iterator(kFixtures)) {
    const std::string dir = entry.path().string(), name = entry.path().filename().string();
    bool has_weights = false;
    if (!entry.is_directory()) continue;
    for (const auto &f : fs::directory_iterator(dir)) has_weights |= f.path().extension() == ".safetensors";
    if (!fs::exists(dir + "/config.json") || !has_weights) continue;
    const ModelConfig c = load_model_config(dir);
    const WeightSchema s = model_entry(c).schema(c);
    const auto ck = Checkpoint::open(dir);
    std::vector<std::pair<int, int>> calls;
    const Weights w = bind(c, *ck, [&](int done, int total) { calls.push_back({done, total}); });
    const Weights shapes = shape_weights(c, s);

    // The schema names exactly the checkpoint's tensors (a tied lm_head is the embedding, stored or not).
    // (less what the schema skips knowingly: a vision tower, counted apart)
    std::set<std::string> in_file, in_schema;
    int32_t skipped_n = 0;
    int64_t skipped_b = 0;
    for (const auto &[n, t] : ck->tensors()) {
      bool skipped = false;
      for (const std::string &p : s.skipped_prefixes) skipped |= n.rfind(p, 0) == 0;
      if (skipped) ++skipped_n, skipped_b += int64_t(t.nbytes);
      else if (!ends_with(n, ".rotary_emb.inv_freq")) in_file.insert(n);
    }
    for (const TensorSpec &t : s.tensors)
      if (!t.absent && !(s.tied_lm_head && t.role == Role::kLmHead && !ck->find(t.name))) in_schema.insert(t.name);
    record(in_file == in_schema, name + ": the schema's tensors are the checkpoint's",
           "file: " + joined(in_file) + "; schema: " + joined(in_schema));
    record(w.skipped_tensors == skipped_n && w.skipped_bytes == skipped_b, name + ": skipped what the schema skips",
           std::to_string(w.skipped_tensors) + " tensors, " + std::to_string(w.skipped_bytes) + " B");
    record(w.n_layers() == c.n_layers && shapes.n_layers() == c.n_layers, name + ": layers");

    // Each tensor bound as the file holds it (matrices in place, vectors widened to fp32), and the same shapes
    // from shape_weights, which reads no file.
    int64_t params = 0, bytes = 0, host = 0;
    bool all_ok = true;
    for (const TensorSpec &t : s.tensors) {
      const std::vector<int64_t> want = t.absent ? std::vector<int64_t>{} : t.shape;
      bool ok = w.shape(t.role, t.layer) == want && shapes.shape(t.role, t.layer) == want;
      const bool tied = s.tied_lm_head && t.role == Role::kLmHead;
      const std::string embed_name = s.tensors.front().name;  // (the embedding: the schema's first)
      const TensorInfo *info = t.absent ? nullptr : ck->find(tied ? embed_name : t.name);
      if (t.absent) {
        ok = ok && (t.kind == TensorSpec::kMatrix ? w.matrix(t.role, t.layer).rows == 0
                                                  : w.vec(t.role, t.layer).empty());
      } else if (!info || info->shape != t.shape) {
        ok = false;
      } else if (t.kind == TensorSpec::kMatrix) {
        const Matrix &m = w.matrix(t.role, t.layer), &ms = shapes.matrix(t.role, t.layer);
        ok = ok && m.data == info->data && m.dtype == info->dtype && ms.data == nullptr && ms.rows == m.rows &&
             ms.cols == m.cols;
      } else {
        const std::vector<float> &v = w.vec(t.role, t.layer);
        ok = ok && int64_t(v.size()) == elems(t.shape) && shapes.vec(t.role, t.layer).empty();
        for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i] == load_as_f32(info->data, info->dtype, int64_t(i));
      }
      if (!ok) record(false, name + ": " + t.name + " bound as the file holds it");
      all_ok = all_ok && ok;
      if (t.absent || tied || !info) continue;
      params += elems(info->shape), bytes += int64_t(info->nbytes);
      if (t.kind == TensorSpec::kVector) host += 4 * elems(t.shape);
    }
    record(all_ok, name + ": every tensor bound as the file holds it");
    if (s.tied_lm_head)
      record(w.matrix(Role::kLmHead).data == w.matrix(Role::kEmbed).data, name + ": the tied lm_head is the embedding");
    record(w.n_params == params && w.bytes == bytes && w.host_bytes == host,
           name + ": totals", std::to_string(w.n_params) + " params, " + std::to_string(w.bytes) + " B, host " +
                                  std::to_string(w.host_bytes) + " B; the files: " + std::to_string(params) + ", " +
                                  std::to_string(bytes) + ", " + std::to_string(host));
    record(w.dtype == ck->find(s.tensors.front().name)->dtype, name + ": dtype is the embedding's");
    std::vector<std::pair<int, int>> want_calls;
    for (int l = 1; l <= c.n_layers; ++l) want_calls.push_back({l, c.n_layers});
    record(calls == want_calls, name + ": progress once per layer");
    ++checked;
  }
  std::printf("fixtures bound by their schema: %d\n", checked);
  CHECK(checked >= 5);
}

// A vision tower and an MTP head under skipped prefixes: counted, not bound, not unused; and the binder holds no
// checkpoint layout of its own: the same model nested under another prefix binds by a schema that says so.
void test_skipped_and_nested() {
  const std::string llama_dir = kFixtures + "/llama-bf16";
  const ModelConfig c = load_model_config(llama_dir);
  const std::vector<StTensor> L = read_tensors(llama_dir);
  auto ts = L;
  ts.push_back(f32("model.visual.blocks.0.attn.qkv.weight", {4, 4}));      // 64 bytes
  ts.push_back({"mtp.fc.weight", "BF16", {2, 8}, std::string(32, '\0')});  // 32 bytes
  const std::string dir = g_tmp.next();
  write_checkpoint(dir, ts);
  const auto ck = Checkpoint::open(dir), plain_ck = Checkpoint::open(llama_dir);
  WeightSchema s = dense_schema(c);
  const Weights plain = bind_weights(c, s, *plain_ck, nullptr);
  s.skipped_prefixes = {"model.visual.", "mtp."};
  const Weights w = bind_weights(c, s, *ck, nullptr);
  CHECK(w.skipped_tensors == 2);
  CHECK(w.skipped_bytes == 96);
  CHECK(w.n_params == plain.n_params && w.bytes == plain.bytes && w.host_bytes == plain.host_bytes);
  s.skipped_prefixes = {"mtp."};
  std::string message;
  try {
    bind_weights(c, s, *ck, nullptr);
  } catch (const Error &e) {
    message = e.what();
  }
  record(message == "tensor model.visual.blocks.0.attn.qkv.weight is in the checkpoint but a LlamaForCausalLM with this "
                    "config.json does not use it (is `architectures` in config.json right?)",
         "a tower not skipped is unused", message);

  // Nested: every model.* tensor under model.language_model.*, the schema's names moved the same way.
  const std::string from = "model.", to = "model.language_model.";
  WeightSchema nested = dense_schema(c);
  for (TensorSpec &t : nested.tensors)
    if (t.name.rfind(from, 0) == 0) t.name = to + t.name.substr(from.size());
  nested.layers_prefix = to + "layers.";
  CHECK(SchemaBuilder(to).layer(3).vector(Role::kAttnNorm, "input_layernorm.weight", 2).schema.tensors.at(0).name ==
        "model.language_model.layers.3.input_layernorm.weight");
  ts = L;
  for (StTensor &t : ts)
    if (t.name.rfind(from, 0) == 0) t.name = to + t.name.substr(from.size());
  const std::string nested_dir = g_tmp.next();
  write_checkpoint(nested_dir, ts);
  const auto nested_ck = Checkpoint::open(nested_dir);
  const Weights wn = bind_weights(c, nested, *nested_ck, nullptr);
  CHECK(wn.n_params == plain.n_params && wn.bytes == plain.bytes);
  ts.push_back(f32(to + "layers.5.input_layernorm.weight", {c.hidden_size}));
  const std::string extra_dir = g_tmp.next();
  write_checkpoint(extra_dir, ts);
  message.clear();
  try {
    bind_weights(c, nested, *Checkpoint::open(extra_dir), nullptr);
  } catch (const Error &e) {
    message = e.what();
  }
  record(message.find("(config.json's num_hidden_layers is 2; is the architecture right?)") != std::string::npos,
         "a nested extra layer is called one", message);
}

// Weights refuses what its schema did not declare, and its references survive a move (a CpuDecoder moves its
// Weights in before the model binds them).
void test_weights_rules() {
  SchemaBuilder b("model.");
  b.body().matrix(Role::kEmbed, "embed_tokens.weight", 4, 2);
  b.layer(0)
      .vector(Role::kAttnNorm, "input_layernorm.weight", 2)
      .optional(false, Role::kQBias, "self_attn.q_proj.bias", 2);
  CHECK(b.schema.tensors.at(0).name == "model.embed_tokens.weight");
  CHECK(b.schema.tensors.at(1).name == "model.layers.0.input_layernorm.weight");
  Weights w(b.schema);
  CHECK(w.n_layers() == 1);
  CHECK(logic_error_from([&] { w.vec(Role::kQNorm, 0); }));    // never declared
  CHECK(logic_error_from([&] { w.matrix(Role::kAttnNorm, 0); }));  // a vector
  CHECK(logic_error_from([&] { w.matrix(Role::kEmbed, 1); }));  // no layer 1
  CHECK(logic_error_from([&] { w.matrix(Role::kEmbed, 0); }));  // a global, not layer 0's
  CHECK(logic_error_from([&] { w.set(Role::kEmbed, -1, Matrix{nullptr, DType::BF16, 3, 2}); }));  // not its shape
  CHECK(logic_error_from([&] { w.set(Role::kQBias, 0, std::vector<float>(2)); }));  // absent by the config
  CHECK(w.vec(Role::kQBias, 0).empty() && w.shape(Role::kQBias, 0).empty());
  CHECK(!logic_error_from([&] { w.set(Role::kAttnNorm, 0, std::vector<float>{1.f, 2.f}); }));
  const std::vector<float> *norm = &w.vec(Role::kAttnNorm, 0);
  const Matrix *embed = &w.matrix(Role::kEmbed);
  const Weights moved = std::move(w);
  CHECK(&moved.vec(Role::kAttnNorm, 0) == norm && &moved.matrix(Role::kEmbed) == embed);
  b.layer(0).vector(Role::kAttnNorm, "again.weight", 2);
  CHECK(logic_error_from([&] { Weights twice(b.schema); }));  // one role of one layer declared twice
}

// Every refusal the binder gives, on one-tensor edits of the fixtures (Llama untied without biases, Qwen2 tied with
// q/k/v biases), and the edits it accepts (the tied lm_head's identical copy, rotary inv_freq buffers).
void test_messages() {
  const std::string llama_dir = kFixtures + "/llama-bf16", qwen2_dir = kFixtures + "/qwen2-f16";
  const ModelConfig llama = load_model_config(llama_dir), qwen2 = load_model_config(qwen2_dir);
  const std::vector<StTensor> L = read_tensors(llama_dir), Q = read_tensors(qwen2_dir);
  refused("unedited llama", llama, L, "ok");
  refused("unedited qwen2", qwen2, Q, "ok");

  auto ts = L;
  drop(ts, "model.layers.1.mlp.up_proj.weight");
  refused("missing matrix", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.1.mlp.up_proj.weight is missing from the checkpoint");
  ts = L;
  drop(ts, "model.norm.weight");
  refused("missing final norm", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor model.norm.weight is missing from the checkpoint");
  ts = Q;
  drop(ts, "model.layers.0.self_attn.k_proj.bias");
  refused("missing Qwen2 bias", qwen2, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.self_attn.k_proj.bias is missing from the checkpoint (a "
          "Qwen2ForCausalLM has q/k/v biases)");
  ModelConfig c = llama;
  c.qkv_bias = c.o_bias = true;
  refused("attention_bias true, no biases", c, L,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.self_attn.q_proj.bias is missing from the checkpoint (config.json's "
          "attention_bias is true)");
  c = llama;
  c.mlp_bias = true;
  refused("mlp_bias true, no biases", c, L,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.mlp.gate_proj.bias is missing from the checkpoint (config.json's "
          "mlp_bias is true)");
  c = llama;
  c.qk_norm = true;
  refused("qk_norm without q_norm", c, L,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.self_attn.q_norm.weight is missing from the checkpoint");

  ts = L;
  std::vector<int64_t> &down = find(ts, "model.layers.0.mlp.down_proj.weight")->shape;
  std::swap(down[0], down[1]);
  refused("transposed matrix", llama, ts,
          "ERR_SHAPE_MISMATCH: tensor model.layers.0.mlp.down_proj.weight has shape (" +
              std::to_string(llama.intermediate_size) + ", " + std::to_string(llama.hidden_size) +
              ") but config.json implies (" + std::to_string(llama.hidden_size) + ", " +
              std::to_string(llama.intermediate_size) + ")");
  ts = L;
  find(ts, "model.layers.1.post_attention_layernorm.weight")->dtype = "I16";
  refused("I16 norm", llama, ts,
          "ERR_UNSUPPORTED_DTYPE: tensor model.layers.1.post_attention_layernorm.weight has dtype I16; supported weight "
          "dtypes are BF16, F16 and F32");

  ts = L;
  drop(ts, "lm_head.weight");
  refused("untied without lm_head", llama, ts,
          "ERR_BAD_CHECKPOINT: lm_head.weight is missing and config.json does not set tie_word_embeddings");
  ts = Q;
  StTensor head = *find(ts, "model.embed_tokens.weight");
  head.name = "lm_head.weight";
  ts.push_back(head);
  refused("tied, lm_head an exact copy", qwen2, ts, "ok");
  ts.back().bytes[0] ^= 1;
  refused("tied, lm_head different", qwen2, ts,
          "ERR_BAD_CHECKPOINT: config.json sets tie_word_embeddings, but the checkpoint's lm_head.weight differs from "
          "model.embed_tokens.weight: set tie_word_embeddings to false to use it, or drop it");

  const std::string unused = " is in the checkpoint but a ";
  ts = L;
  ts.push_back(f32("model.layers.0.self_attn.rotary_emb.inv_freq", {8}));
  ts.push_back(f32("model.layers.1.self_attn.rotary_emb.inv_freq", {8}));
  refused("rotary inv_freq buffers", llama, ts, "ok");
  ts = L;
  ts.push_back(f32("model.layers.0.self_attn.q_norm.weight", {llama.head_dim}));
  refused("unused q_norm", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.self_attn.q_norm.weight" + unused +
              "LlamaForCausalLM with this config.json does not use it (LlamaForCausalLM has no q_norm/k_norm (Qwen3 "
              "has): is `architectures` in config.json right?)");
  ts = L;
  ts.push_back(f32("model.layers.1.self_attn.q_proj.bias", {llama.n_heads * llama.head_dim}));
  refused("unused attention bias", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.1.self_attn.q_proj.bias" + unused +
              "LlamaForCausalLM with this config.json does not use it (config.json's attention_bias is false)");
  c = llama;
  c.architecture = "MistralForCausalLM";
  refused("unused Mistral attention bias", c, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.1.self_attn.q_proj.bias" + unused +
              "MistralForCausalLM with this config.json does not use it (MistralForCausalLM has no attention biases)");
  ts = Q;
  ts.push_back(f32("model.layers.0.self_attn.o_proj.bias", {qwen2.hidden_size}));
  refused("unused Qwen2 o bias", qwen2, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.self_attn.o_proj.bias" + unused +
              "Qwen2ForCausalLM with this config.json does not use it (Qwen2 has biases on q/k/v only)");
  ts = Q;
  ts.push_back(f32("model.layers.0.mlp.down_proj.bias", {qwen2.hidden_size}));
  refused("unused Qwen2 MLP bias", qwen2, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.mlp.down_proj.bias" + unused +
              "Qwen2ForCausalLM with this config.json does not use it (Qwen2ForCausalLM has no MLP biases)");
  ts = L;
  ts.push_back(f32("model.layers.0.mlp.up_proj.bias", {llama.intermediate_size}));
  refused("unused Llama MLP bias", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.0.mlp.up_proj.bias" + unused +
              "LlamaForCausalLM with this config.json does not use it (config.json's mlp_bias is false)");
  ts = L;
  ts.push_back(f32("model.layers.9.input_layernorm.weight", {llama.hidden_size}));
  refused("an extra layer", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.9.input_layernorm.weight" + unused +
              "LlamaForCausalLM with this config.json does not use it (config.json's num_hidden_layers is " +
              std::to_string(llama.n_layers) + "; is the architecture right?)");
  ts.push_back(f32("model.visual.patch_embed.weight", {4, 4}));
  ts.push_back(f32("mtp.fc.weight", {4, 4}));
  refused("three unused", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor model.layers.9.input_layernorm.weight" + unused +
              "LlamaForCausalLM with this config.json does not use it (config.json's num_hidden_layers is " +
              std::to_string(llama.n_layers) + "; is the architecture right?); 2 more unused");
  ts = L;
  ts.push_back(f32("mtp.fc.weight", {4, 4}));
  refused("unused, not a layer's", llama, ts,
          "ERR_BAD_CHECKPOINT: tensor mtp.fc.weight" + unused +
              "LlamaForCausalLM with this config.json does not use it (is `architectures` in config.json right?)");
}

int main() {
  test_fixtures();
  test_skipped_and_nested();
  test_weights_rules();
  test_messages();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
