// decode-profile.cpp - times each op of llama.cpp decode steps (or of whole prompt batches) through the
// scheduler's graph evaluation callback (llama_context_params.cb_eval) and prints JSON for
// tools/profile.py.
//
// Built by tools/profile.py against a llama.cpp checkout's headers (include/, ggml/include/) and its
// built libllama / libggml / libggml-base; it uses the public API only. Not a tool of its own: run
// tools/profile.py.
//
// One process loads the model once and makes two contexts: "plain" (no callback) and "probed" (our
// callback). Both decode the same random prompt, then every round decodes N single tokens at positions
// P..P+N-1 in each mode, removing those positions from the KV cache before the next mode:
//   none   the plain context: the whole-token time without any callback
//   light  the probed context; the callback asks for the graph's last node only, so the scheduler
//          computes the whole graph in one go: graph time = first ask .. last answer, and the token
//          time shows what a callback alone costs
//   nodes  the probed context; the callback asks for every node but norms (a norm is computed with
//          the node after it, so that ggml-cpu's RMS_NORM+MUL fusion still happens): one compute per
//          segment, timed from the segment's first ask to its answer. Segments of empty ops (VIEW,
//          RESHAPE, PERMUTE, TRANSPOSE, NONE) do no work: their time is the cost of one compute
//          planned for 1 thread (scheduler loop, plan, synchronize, callback), which profile.py
//          subtracts. After every round, compute_cost_us() times a one-op graph at 1 and at THREADS
//          threads: the difference is a thread fork/join, which ops run on all threads pay on top.
// A model with a recurrent state (Mamba, the Gated-DeltaNet blocks of qwen35) cannot drop the last
// positions (its state is not kept per token unless n_rs_seq > 0, which changes the graph): when
// llama_memory_seq_rm refuses, the memory is cleared and the prompt decoded again, untimed ("reprompts"
// in the JSON).
//
// --kind prompt: a step is one whole batch of P tokens instead, decoded as ONE ubatch (n_batch =
// n_ubatch = P) at positions 0..P-1 on an empty memory (cleared before every batch, untimed), with the
// logits of the last token only, as llama-bench's pp test; the same three modes, N batches per mode and
// round. No prompt is decoded before the rounds.
// Timing: steady_clock; a step is llama_decode + llama_synchronize.

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;

double us_since(clk::time_point a, clk::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}

enum class Mode { none, light, nodes };

struct NodeInfo {
    int op_id = 0;
    std::string op, name, type, src0_name, src0_type, src0_buft, src1_type;
    bool src0_weights = false;
    size_t src0_bytes = 0;
    int64_t ne[4] = {0, 0, 0, 0};
    int64_t src0_ne[4] = {0, 0, 0, 0};
};

struct Segment {
    int first, last;
    double us;
};

struct Probe {
    Mode mode = Mode::nodes;
    bool learning = false;      // the warm-up step: fill `table`
    int n_nodes = -1;           // learned in the warm-up step
    int asked = 0;              // ask=true calls in this step (= node index + 1)
    int seg_first = -1;         // the first node of the open segment
    clk::time_point seg_start, first_ask, last_answer;
    bool any_ask = false;
    std::vector<Segment> segs;
    std::vector<NodeInfo> table;
    std::vector<int> ops_seen;      // this step's ggml_op of each node, to check the graph is unchanged
    std::string error;

    void reset() {
        asked = 0;
        seg_first = -1;
        any_ask = false;
        segs.clear();
        ops_seen.clear();
        segs.reserve(4096);
        ops_seen.reserve(8192);
    }
};

bool is_norm(const ggml_tensor * t) {
    return t->op == GGML_OP_RMS_NORM || t->op == GGML_OP_NORM;
}

NodeInfo describe(const ggml_tensor * t) {
    NodeInfo n;
    n.op_id = (int) t->op;
    n.op = ggml_op_desc(t);
    n.name = t->name;
    n.type = ggml_type_name(t->type);
    for (int i = 0; i < 4; i++) {
        n.ne[i] = t->ne[i];
    }
    const ggml_tensor * s0 = t->src[0];
    if (s0) {
        n.src0_name = s0->name;
        n.src0_type = ggml_type_name(s0->type);
        n.src0_bytes = ggml_nbytes(s0);
        for (int i = 0; i < 4; i++) {
            n.src0_ne[i] = s0->ne[i];
        }
        ggml_backend_buffer_t buf = s0->buffer ? s0->buffer : (s0->view_src ? s0->view_src->buffer : nullptr);
        if (buf) {
            n.src0_buft = ggml_backend_buft_name(ggml_backend_buffer_get_type(buf));
            n.src0_weights = ggml_backend_buffer_get_usage(buf) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
        }
    }
    if (t->src[1]) {
        n.src1_type = ggml_type_name(t->src[1]->type);
    }
    return n;
}

bool eval_cb(ggml_tensor * t, bool ask, void * user_data) {
    Probe & p = *static_cast<Probe *>(user_data);
    if (ask) {
        // the bookkeeping first, the clock last: a segment's time excludes this callback's own work
        const int idx = p.asked++;
        if (p.learning) {
            p.table.push_back(describe(t));
        }
        bool need;
        if (p.mode == Mode::nodes) {
            p.ops_seen.push_back((int) t->op);
            need = !is_norm(t);
        } else {
            need = idx == p.n_nodes - 1;      // light: only the last node
        }
        if (p.seg_first < 0) {
            p.seg_first = idx;
            if (p.mode == Mode::nodes || !p.any_ask) {
                p.seg_start = clk::now();     // light mode reads the clock at its first ask only
            }
            if (!p.any_ask) {
                p.first_ask = p.seg_start;
                p.any_ask = true;
            }
        }
        return need;
    }
    // the answer: the scheduler computed nodes seg_first .. asked-1 and synchronized
    const clk::time_point now = clk::now();
    p.last_answer = now;
    p.segs.push_back({p.seg_first, p.asked - 1, us_since(p.seg_start, now)});
    p.seg_first = -1;
    return true;
}

std::string json_str(const std::string & s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += (char) c;
        } else if (c < 0x20) {
            char b[8];
            snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += (char) c;
        }
    }
    return o + "\"";
}

// The cost of one compute on the CPU backend with THREADS threads, without the scheduler: the median
// of many computes of a graph of one 1-element ADD (an op ggml-cpu runs on all threads, so the threads
// fork, join and meet at a barrier, as for a real op computed alone), in µs; -1 when no CPU backend.
double compute_cost_us(int threads) {
    ggml_backend_t cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    if (!cpu) {
        return -1;
    }
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_get_device(cpu));
    auto set_n = (ggml_backend_set_n_threads_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (set_n) {
        set_n(cpu, threads);
    }
    ggml_init_params ip = {1 << 20, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    *(float *) a->data = 1.0f;
    *(float *) b->data = 2.0f;
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 8, false);
    ggml_build_forward_expand(gf, ggml_add(ctx, a, b));
    std::vector<double> t;
    for (int i = 0; i < 2200; i++) {
        const clk::time_point t0 = clk::now();
        ggml_backend_graph_compute(cpu, gf);
        if (i >= 200) {
            t.push_back(us_since(t0, clk::now()));
        }
    }
    ggml_free(ctx);
    ggml_backend_free(cpu);
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    return t[t.size() / 2];
}

void usage(const char * argv0) {
    fprintf(stderr,
            "usage: %s -m MODEL.gguf -o OUT.json [-t THREADS] [-p PROMPT_TOKENS] [-n STEPS] [-r ROUNDS] [-w WARMUP]\n"
            "          [--kind decode|prompt] [--fa on|off|auto] [--mmap 0|1] [--modes none,light,nodes] [--seed N]\n"
            "--kind prompt: a step is a whole batch of PROMPT_TOKENS tokens (one ubatch); -n batches per mode\n"
            "and round, -w batches of warm-up per context.\n"
            "Not meant to be run by hand: tools/profile.py builds and runs it.\n",
            argv0);
}

struct Args {
    std::string model, out, fa = "auto", modes = "none,light,nodes", kind = "decode";
    int threads = 1, n_prompt = 16, n_gen = 8, rounds = 2, mmap = 0, warmup = 8;
    unsigned seed = 42;
};

bool parse(int argc, char ** argv, Args & a) {
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "decode-profile: %s needs a value\n", k.c_str());
            return false;
        }
        const char * v = argv[++i];
        if (k == "-m") a.model = v;
        else if (k == "-o") a.out = v;
        else if (k == "-t") a.threads = atoi(v);
        else if (k == "-p") a.n_prompt = atoi(v);
        else if (k == "-n") a.n_gen = atoi(v);
        else if (k == "-r") a.rounds = atoi(v);
        else if (k == "-w") a.warmup = atoi(v);
        else if (k == "--fa") a.fa = v;
        else if (k == "--mmap") a.mmap = atoi(v);
        else if (k == "--modes") a.modes = v;
        else if (k == "--kind") a.kind = v;
        else if (k == "--seed") a.seed = (unsigned) strtoul(v, nullptr, 10);
        else {
            fprintf(stderr, "decode-profile: unknown argument %s\n", k.c_str());
            return false;
        }
    }
    if (a.model.empty() || a.out.empty() || a.threads < 1 || a.n_prompt < 1 || a.n_gen < 1 || a.rounds < 1 ||
        a.warmup < 1 ||
        (a.fa != "on" && a.fa != "off" && a.fa != "auto") || (a.kind != "decode" && a.kind != "prompt")) {
        fprintf(stderr, "decode-profile: bad arguments\n");
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char ** argv) {
    Args a;
    if (!parse(argc, argv, a)) {
        usage(argv[0]);
        return 2;
    }
    std::vector<Mode> modes;
    for (const char * m : {"none", "light", "nodes"}) {
        if (("," + a.modes + ",").find(std::string(",") + m + ",") != std::string::npos) {
            modes.push_back(!strcmp(m, "none") ? Mode::none : !strcmp(m, "light") ? Mode::light : Mode::nodes);
        }
    }

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_mmap = a.mmap != 0;
    llama_model * model = llama_model_load_from_file(a.model.c_str(), mp);
    if (!model) {
        fprintf(stderr, "decode-profile: cannot load %s\n", a.model.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    Probe probe;
    auto make_ctx = [&](bool with_cb) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t) (a.n_prompt + a.n_gen + 16);
        cp.n_batch = (uint32_t) a.n_prompt;
        cp.n_ubatch = (uint32_t) a.n_prompt;
        cp.n_threads = a.threads;
        cp.n_threads_batch = a.threads;
        cp.flash_attn_type = a.fa == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                             : a.fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_AUTO;
        if (with_cb) {
            cp.cb_eval = eval_cb;
            cp.cb_eval_user_data = &probe;
        }
        return llama_init_from_model(model, cp);
    };
    llama_context * plain = make_ctx(false);
    llama_context * probed = make_ctx(true);
    if (!plain || !probed) {
        fprintf(stderr, "decode-profile: cannot create the contexts\n");
        return 1;
    }

    const bool prompt_kind = a.kind == "prompt";
    std::mt19937 rng(a.seed);
    std::uniform_int_distribution<int> pick(0, n_vocab - 1);
    std::vector<llama_token> prompt(a.n_prompt);
    for (auto & t : prompt) {
        t = pick(rng);
    }
    // decodes the prompt in CTX; the callback (probed context) asks for no node, so the graph is computed
    // in one go and nothing is recorded
    auto decode_prompt = [&](llama_context * ctx) {
        const Mode mode = probe.mode;
        const int n_nodes = probe.n_nodes;
        probe.mode = Mode::light;
        probe.n_nodes = 1 << 30;
        probe.reset();
        const clk::time_point t0 = clk::now();
        if (llama_decode(ctx, llama_batch_get_one(prompt.data(), (int32_t) prompt.size())) != 0) {
            fprintf(stderr, "decode-profile: the prompt failed to decode\n");
            exit(1);
        }
        llama_synchronize(ctx);
        const double us = us_since(t0, clk::now());
        probe.mode = mode;
        probe.n_nodes = n_nodes;
        return us;
    };
    double prompt_us[2] = {0, 0};
    if (!prompt_kind) {
        for (int c = 0; c < 2; c++) {
            prompt_us[c] = decode_prompt(c ? probed : plain);
        }
    }

    // one step: a single token after the prompt (decode), or a whole batch of N_PROMPT tokens on an empty
    // memory (prompt; the memory is cleared first, untimed)
    std::vector<llama_token> batch(prompt_kind ? a.n_prompt : 1);
    auto step = [&](llama_context * ctx) {
        if (prompt_kind) {
            llama_memory_clear(llama_get_memory(ctx), false);
        }
        for (auto & t : batch) {
            t = pick(rng);
        }
        probe.reset();
        const clk::time_point t0 = clk::now();
        if (llama_decode(ctx, llama_batch_get_one(batch.data(), (int32_t) batch.size())) != 0) {
            fprintf(stderr, "decode-profile: a %s failed\n", prompt_kind ? "prompt batch" : "decode step");
            exit(1);
        }
        llama_synchronize(ctx);
        const clk::time_point t1 = clk::now();
        return std::make_pair(us_since(t0, t1), t1);
    };
    // back to the state right after the prompt (decode); a recurrent state cannot drop positions (the
    // memory refuses): then clear it and decode the prompt again, untimed
    int reprompts = 0;
    auto rewind = [&](llama_context * ctx) {
        if (prompt_kind) {
            return;         // every batch starts on an empty memory anyway
        }
        if (!llama_memory_seq_rm(llama_get_memory(ctx), 0, a.n_prompt, -1)) {
            llama_memory_clear(llama_get_memory(ctx), false);
            decode_prompt(ctx);
            reprompts++;
        }
    };

    // warm-up: WARMUP steps per context, not recorded (the first steps after a load run slower); the
    // probed context's first step learns the graph's nodes
    probe.mode = Mode::nodes;
    probe.learning = true;
    step(probed);
    probe.learning = false;
    probe.n_nodes = (int) probe.table.size();
    probe.mode = Mode::light;
    for (int i = 0; i < a.warmup; i++) {
        if (i + 1 < a.warmup) {
            step(probed);
        }
        step(plain);
        if ((i + 1) % a.n_gen == 0) {
            rewind(plain);
            rewind(probed);
        }
    }
    rewind(plain);
    rewind(probed);
    if (probe.n_nodes == 0) {
        fprintf(stderr, "decode-profile: the callback saw no nodes\n");
        return 1;
    }

    std::string steps_json;
    std::vector<std::pair<double, double>> calib;   // per round: one compute's cost at 1 and at THREADS threads
    int graph_changes = 0;
    for (int r = 0; r < a.rounds; r++) {
        for (size_t mi = 0; mi < modes.size(); mi++) {
            const Mode m = modes[(mi + r) % modes.size()];   // the order rotates from round to round
            llama_context * ctx = m == Mode::none ? plain : probed;
            probe.mode = m;
            for (int i = 0; i < a.n_gen; i++) {
                const auto [tok_us, t_end] = step(ctx);
                char buf[256];
                snprintf(buf, sizeof buf, "%s{\"round\":%d,\"pos\":%d,\"n_tokens\":%d,\"mode\":\"%s\",\"%s\":%.2f",
                         steps_json.empty() ? "" : ",\n", r, prompt_kind ? 0 : a.n_prompt + i, (int) batch.size(),
                         m == Mode::none ? "none" : m == Mode::light ? "light" : "nodes",
                         prompt_kind ? "batch_us" : "token_us", tok_us);
                steps_json += buf;
                if (m != Mode::none) {
                    if (probe.segs.empty() || probe.asked != probe.n_nodes) {
                        fprintf(stderr, "decode-profile: the callback saw %d nodes, %zu answers (expected %d nodes)\n",
                                probe.asked, probe.segs.size(), probe.n_nodes);
                        return 1;
                    }
                    snprintf(buf, sizeof buf, ",\"graph_us\":%.2f,\"before_us\":%.2f,\"after_us\":%.2f",
                             us_since(probe.first_ask, probe.last_answer),
                             tok_us - us_since(probe.first_ask, t_end), us_since(probe.last_answer, t_end));
                    steps_json += buf;
                }
                if (m == Mode::nodes) {
                    for (int k = 0; k < probe.n_nodes; k++) {
                        if (probe.ops_seen[k] != probe.table[k].op_id) {
                            graph_changes++;
                            break;
                        }
                    }
                    steps_json += ",\"segs\":[";
                    for (size_t k = 0; k < probe.segs.size(); k++) {
                        snprintf(buf, sizeof buf, "%s[%d,%d,%.2f]", k ? "," : "", probe.segs[k].first,
                                 probe.segs[k].last, probe.segs[k].us);
                        steps_json += buf;
                    }
                    steps_json += "]";
                }
                steps_json += "}";
            }
            rewind(ctx);
        }
        calib.push_back({compute_cost_us(1), compute_cost_us(a.threads)});
    }
    if (graph_changes) {
        fprintf(stderr, "decode-profile: the graph's ops changed in %d steps; the node table does not fit them\n",
                graph_changes);
        return 1;
    }

    FILE * f = fopen(a.out.c_str(), "w");
    if (!f) {
        fprintf(stderr, "decode-profile: cannot write %s\n", a.out.c_str());
        return 1;
    }
    char desc[256];
    llama_model_desc(model, desc, sizeof desc);
    fprintf(f, "{\"format\":2,\"kind\":%s,\"model\":%s,\"desc\":%s,\"threads\":%d,\"n_prompt\":%d,\"n_gen\":%d,"
               "\"rounds\":%d,\"warmup\":%d,\"fa\":%s,\"mmap\":%d,\"n_batch\":%d,\"n_ubatch\":%d,\"model_bytes\":%llu,"
               "\"prompt_us\":[%.1f,%.1f],\"reprompts\":%d,\n\"nodes\":[\n",
            json_str(a.kind).c_str(), json_str(a.model).c_str(), json_str(desc).c_str(), a.threads, a.n_prompt,
            a.n_gen, a.rounds, a.warmup, json_str(a.fa).c_str(), a.mmap, (int) llama_n_batch(plain),
            (int) llama_n_ubatch(plain), (unsigned long long) llama_model_size(model), prompt_us[0], prompt_us[1],
            reprompts);
    for (size_t k = 0; k < probe.table.size(); k++) {
        const NodeInfo & n = probe.table[k];
        fprintf(f, "%s{\"op\":%s,\"name\":%s,\"type\":%s,\"ne\":[%lld,%lld,%lld,%lld],\"src0\":%s,\"src0_type\":%s,"
                   "\"src0_buft\":%s,\"src0_weights\":%s,\"src0_bytes\":%zu,\"src0_ne\":[%lld,%lld,%lld,%lld],"
                   "\"src1_type\":%s}",
                k ? ",\n" : "", json_str(n.op).c_str(), json_str(n.name).c_str(), json_str(n.type).c_str(),
                (long long) n.ne[0], (long long) n.ne[1], (long long) n.ne[2], (long long) n.ne[3],
                json_str(n.src0_name).c_str(), json_str(n.src0_type).c_str(), json_str(n.src0_buft).c_str(),
                n.src0_weights ? "true" : "false", n.src0_bytes, (long long) n.src0_ne[0], (long long) n.src0_ne[1],
                (long long) n.src0_ne[2], (long long) n.src0_ne[3], json_str(n.src1_type).c_str());
    }
    fprintf(f, "],\n\"compute_cost_us\":[");
    for (size_t k = 0; k < calib.size(); k++) {
        fprintf(f, "%s[%.3f,%.3f]", k ? "," : "", calib[k].first, calib[k].second);
    }
    fprintf(f, "],\n\"steps\":[\n%s]}\n", steps_json.c_str());
    fclose(f);

    llama_free(probed);
    llama_free(plain);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
