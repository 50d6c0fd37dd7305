#include "token_stream.h"

#include <algorithm>
#include <memory>

namespace vtb {

TokenStream *TokenStream::create(Napi::Env env, Napi::Function on_step) {
  auto *self = new TokenStream();
  // The finalizer runs on the JS thread once the function is released and its queue delivered (or the environment
  // ends, when nobody is left to tell).
  self->tsfn_ = Napi::ThreadSafeFunction::New(env, on_step, "vtengine.step", 0 /* unbounded: never block the step thread */, 1,
                                              [](Napi::Env env, TokenStream *s) {
                                                std::unique_ptr<TokenStream> owned(s);
                                                if (!s->drained_) return;
                                                try {
                                                  s->drained_->Resolve(env.Undefined());
                                                } catch (const Napi::Error &) {
                                                }
                                              }, self);
  self->tsfn_.Unref(env);
  return self;
}

void TokenStream::on_step(const vt_step_event *events, int32_t n, void *user) {
  auto *self = static_cast<TokenStream *>(user);
  auto *batch = new Batch();
  batch->events.assign(events, events + n);
  batch->messages.resize(n);
  batch->prompt_logprobs.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    if (events[i].message) batch->messages[i] = events[i].message;
    if (events[i].n_prompt_logprobs > 0)
      batch->prompt_logprobs[i].assign(events[i].prompt_logprobs, events[i].prompt_logprobs + events[i].n_prompt_logprobs);
    batch->events[i].message = nullptr;
    batch->events[i].prompt_logprobs = nullptr;
  }
  napi_status st = self->tsfn_.NonBlockingCall(batch, [self](Napi::Env env, Napi::Function fn, Batch *b) { deliver(env, fn, self, b); });
  if (st != napi_ok) delete batch;  // the environment is going away; nobody is left to tell
}

void TokenStream::deliver(Napi::Env env, Napi::Function fn, TokenStream *self, Batch *owned) {
  // Owned here whatever happens: any napi call below throws once the environment is ending.
  std::unique_ptr<Batch> batch(owned);
  if (env == nullptr || fn.IsEmpty()) return;
  const size_t n = batch->events.size();
  Napi::Array arr = Napi::Array::New(env, n);
  int finished = 0;
  for (size_t i = 0; i < n; ++i) {
    const vt_step_event &e = batch->events[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("id", Napi::Number::New(env, double(e.request_id)));
    o.Set("token", Napi::Number::New(env, e.token));
    o.Set("finish", Napi::Number::New(env, e.finish));
    if (e.token >= 0 && e.n_top > 0) {
      o.Set("logprob", Napi::Number::New(env, e.logprob));
      Napi::Array ids = Napi::Array::New(env, e.n_top), lps = Napi::Array::New(env, e.n_top);
      for (int32_t k = 0; k < e.n_top; ++k) {
        ids.Set(uint32_t(k), Napi::Number::New(env, e.top_ids[k]));
        lps.Set(uint32_t(k), Napi::Number::New(env, e.top_logprobs[k]));
      }
      o.Set("topIds", ids);
      o.Set("topLogprobs", lps);
    }
    if (!batch->prompt_logprobs[i].empty()) {
      const auto &lp = batch->prompt_logprobs[i];
      Napi::Array a = Napi::Array::New(env, lp.size());
      for (size_t k = 0; k < lp.size(); ++k) a.Set(uint32_t(k), Napi::Number::New(env, lp[k]));
      o.Set("promptLogprobs", a);
      o.Set("promptLogprobsStart", Napi::Number::New(env, e.prompt_logprobs_start));
    }
    if (e.finish != VT_FINISH_NONE) {
      ++finished;
      o.Set("promptTokens", Napi::Number::New(env, e.prompt_tokens));
      o.Set("completionTokens", Napi::Number::New(env, e.completion_tokens));
      if (!batch->messages[i].empty()) o.Set("message", Napi::String::New(env, batch->messages[i]));
    }
    arr.Set(uint32_t(i), o);
  }
  batch.reset();
  if (finished) self->requests_finished(env, finished);
  fn.Call({arr});
}

void TokenStream::request_started(Napi::Env env) {
  if (released_) return;
  ++in_flight_;
  hold_loop(env);
}

void TokenStream::requests_finished(Napi::Env env, int n) {
  if (released_) return;
  in_flight_ = std::max<int64_t>(0, in_flight_ - n);
  hold_loop(env);
}

void TokenStream::set_paused(Napi::Env env, int64_t n) {
  if (released_) return;
  paused_ = n;
  hold_loop(env);
}

void TokenStream::hold_loop(Napi::Env env) {
  // A paused request's finish event counts here before JS hears of it and stops counting it as paused; for that
  // moment in_flight_ may fall below paused_, which only unrefs early within the same callback.
  const bool hold = in_flight_ > paused_;
  if (hold == holding_) return;
  holding_ = hold;
  if (hold) tsfn_.Ref(env);
  else tsfn_.Unref(env);
}

void TokenStream::release() {
  if (released_) return;
  released_ = true;
  tsfn_.Release();
}

void TokenStream::release(Napi::Env env, Napi::Promise::Deferred drained) {
  if (released_) {
    drained.Resolve(env.Undefined());
    return;
  }
  drained_ = drained;
  tsfn_.Ref(env);  // a pending promise does not keep the process alive; the queue being delivered must
  release();
}

}  // namespace vtb
