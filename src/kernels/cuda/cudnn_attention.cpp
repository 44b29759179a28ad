// cuDNN flash attention through the backend API (cuda/cudnn_attention.h). cuDNN 9's native SDPA operation
// has no causal mask, so we build the composite graph that cudnn-frontend's SDPA nodes lower to (matmul,
// pointwise and reduction operations with virtual intermediates; frontend node/scaled_dot_product_flash_
// attention.h and softmax.h), which cuDNN's runtime-fusion engine recognises as one flash-attention kernel.
// The shape of that graph (op order, virtual dtypes, by-value scalars, the F16x16 dQ accumulator) is what
// the engine matches on, so it stays as the frontend emits it even where a simpler graph would mean the same.
#include "kernels/cuda/cudnn_attention.h"

#include <cudnn_graph.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

using Desc = cudnnBackendDescriptor_t;
using Dims = std::vector<int64_t>;

// cuDNN 9 marks the handle attributes deprecated, yet an operation graph and an execution plan still need
// their handle (cudnn-frontend sets both). Named once here so that -Werror builds stay quiet.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

// ---- The library, dlopen'ed: no link-time dependency on cuDNN ---------------------------------------------

struct Api {
    size_t version = 0;
    decltype(&::cudnnGetVersion) get_version = nullptr;
    decltype(&::cudnnGetErrorString) error_string = nullptr;
    decltype(&::cudnnGetLastErrorString) last_error = nullptr;  // optional (cuDNN >= 9.0)
    decltype(&::cudnnCreate) create = nullptr;
    decltype(&::cudnnSetStream) set_stream = nullptr;
    decltype(&::cudnnBackendCreateDescriptor) create_desc = nullptr;
    decltype(&::cudnnBackendDestroyDescriptor) destroy_desc = nullptr;
    decltype(&::cudnnBackendSetAttribute) set_attr = nullptr;
    decltype(&::cudnnBackendGetAttribute) get_attr = nullptr;
    decltype(&::cudnnBackendFinalize) finalize = nullptr;
    decltype(&::cudnnBackendExecute) execute = nullptr;

    // "<status name>: <cuDNN's last error message>" for error reports.
    std::string describe(cudnnStatus_t st) const {
        std::string msg = error_string(st);
        if (last_error) {
            char buf[512] = {0};
            last_error(buf, sizeof buf);
            if (buf[0]) msg += std::string(": ") + buf;
        }
        return msg;
    }
};

// At most one stderr line per process says why cuDNN attention is not used; callers fall back silently.
void note_unavailable(const std::string& why) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        std::fprintf(stderr, "llmtrain: cuDNN attention not used (%s); using the flash attention kernels\n",
                     why.c_str());
}

template <typename F>
bool bind(void* lib, const char* name, F& fn) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    return fn != nullptr;
}

const Api* load_api() {
    void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcudnn.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* e = dlerror();
        note_unavailable(fmt::format("cannot load libcudnn.so.9: {}", e ? e : "not found"));
        return nullptr;
    }
    auto* a = new Api;  // lives as long as the process, like the library
    const bool ok =
        bind(lib, "cudnnGetVersion", a->get_version) && bind(lib, "cudnnGetErrorString", a->error_string) &&
        bind(lib, "cudnnCreate", a->create) && bind(lib, "cudnnSetStream", a->set_stream) &&
        bind(lib, "cudnnBackendCreateDescriptor", a->create_desc) &&
        bind(lib, "cudnnBackendDestroyDescriptor", a->destroy_desc) &&
        bind(lib, "cudnnBackendSetAttribute", a->set_attr) && bind(lib, "cudnnBackendGetAttribute", a->get_attr) &&
        bind(lib, "cudnnBackendFinalize", a->finalize) && bind(lib, "cudnnBackendExecute", a->execute);
    if (!ok) {
        note_unavailable("libcudnn lacks a backend-API function (not cuDNN 9?)");
        delete a;
        return nullptr;
    }
    bind(lib, "cudnnGetLastErrorString", a->last_error);
    a->version = a->get_version();
    // The graph below needs cuDNN 9: before 9.0 the engine wanted T % 64 == 0 without a padding mask.
    if (a->version < 90000) {
        note_unavailable(fmt::format("cuDNN {} is older than 9.0", a->version));
        delete a;
        return nullptr;
    }
    return a;
}

const Api* api() {
    static const Api* a = load_api();
    return a;
}

// ---- Graph building --------------------------------------------------------------------------------------

// A graph or plan that cuDNN rejects: the caller returns false (and the reason is noted once).
class PlanError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Owns every descriptor of one graph and its plan (cuDNN's plan refers to the graph's descriptors).
class Descriptors {
public:
    explicit Descriptors(const Api& a) : a_(a) {}
    ~Descriptors() {
        for (Desc d : all_) a_.destroy_desc(d);
    }
    Descriptors(const Descriptors&) = delete;
    Descriptors& operator=(const Descriptors&) = delete;

    Desc make(cudnnBackendDescriptorType_t type) {
        Desc d = nullptr;
        check(a_.create_desc(type, &d), "cudnnBackendCreateDescriptor");
        all_.push_back(d);
        return d;
    }
    template <typename T>
    void set(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* v,
             int64_t count = 1) {
        check(a_.set_attr(d, name, type, count, v), "cudnnBackendSetAttribute");
    }
    void finalize(Desc d, const char* what) { check(a_.finalize(d), what); }
    void check(cudnnStatus_t st, const char* what) const {
        if (st != CUDNN_STATUS_SUCCESS) throw PlanError(fmt::format("{}: {}", what, a_.describe(st)));
    }
    const Api& api() const { return a_; }

private:
    const Api& a_;
    std::vector<Desc> all_;
};

// Unique ids of the tensors the caller binds (variant pack); virtual tensors take ids from kFirstVirtual.
enum Uid : int64_t {
    kQ = 1, kK, kV, kO, kStats, kScale, kNegBig, kDO, kDQ, kDK, kDV, kOne, kDQAccum,
    kFirstVirtual = 100,
};

// Builds the operation list of one graph. Tensors are (uid, dtype, dims, strides) with 16-byte alignment,
// 4-d throughout (scalars are {1,1,1,1} passed by value), as the frontend creates them.
class GraphBuilder {
public:
    explicit GraphBuilder(Descriptors& d) : d_(d) {}

    Desc tensor(int64_t uid, cudnnDataType_t dt, const Dims& dims, const Dims& strides, bool is_virtual = false,
                bool by_value = false, bool reorder_f16x16 = false) {
        Desc t = d_.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const int64_t align = 16;
        d_.set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
        d_.set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &dt);
        d_.set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), static_cast<int64_t>(dims.size()));
        d_.set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), static_cast<int64_t>(strides.size()));
        d_.set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align);
        d_.set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
        if (by_value) d_.set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
        if (reorder_f16x16) {
            const cudnnBackendTensorReordering_t r = CUDNN_TENSOR_REORDERING_F16x16;
            d_.set(t, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, &r);
        }
        d_.finalize(t, "tensor descriptor");
        return t;
    }
    Desc virt(cudnnDataType_t dt, const Dims& dims, const Dims& strides) {
        return tensor(next_virtual_++, dt, dims, strides, true);
    }
    Desc scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

    // y = mode(x[, b[, t]]); compute: the math precision (INT32 / BOOLEAN for index and compare ops).
    void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t compute, Desc x, Desc b, Desc t, Desc y,
                   int64_t axis = -1) {
        Desc pw = d_.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        d_.set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
        d_.set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &compute);
        if (axis >= 0) d_.set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
        d_.finalize(pw, "pointwise descriptor");
        Desc op = d_.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        d_.set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, &pw);
        d_.set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
        if (b) d_.set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &b);
        if (t) d_.set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &t);
        d_.set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
        add(op, "pointwise operation");
    }
    void pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc y) {
        pointwise(mode, CUDNN_DATA_FLOAT, x, b, nullptr, y);
    }

    // c = a @ b (batched over the leading dims), fp32 accumulation.
    void matmul(Desc a, Desc b, Desc c) {
        Desc mm = d_.make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
        d_.set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
        d_.finalize(mm, "matmul descriptor");
        Desc op = d_.make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        d_.set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &a);
        d_.set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &b);
        d_.set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &c);
        d_.set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &mm);
        add(op, "matmul operation");
    }

    // y = reduce(x) over the dims where y has extent 1.
    void reduction(cudnnReduceTensorOp_t red, Desc x, Desc y) {
        Desc rd = d_.make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
        d_.set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &red);
        d_.set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
        d_.finalize(rd, "reduction descriptor");
        Desc op = d_.make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        d_.set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
        d_.set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
        d_.set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &rd);
        add(op, "reduction operation");
    }

    // y = x seen through y's dims and strides (the transposes of P, dS and K^T).
    void reshape(Desc x, Desc y) {
        Desc op = d_.make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        d_.set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
        d_.set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
        add(op, "reshape operation");
    }

    // The causal mask on scores s (b, h, i, j): s where i >= j, else the lowest float (exp gives exactly 0).
    // Top-left aligned (T_q == T_kv here), as the frontend's causal_mask: row index >= column index.
    Desc causal_mask(Desc s, const Dims& dims, const Dims& strides, Desc neg_big) {
        Desc row = virt(CUDNN_DATA_INT32, dims, strides);
        pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, nullptr, row, 2);
        Desc col = virt(CUDNN_DATA_INT32, dims, strides);
        pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, nullptr, col, 3);
        Desc keep = virt(CUDNN_DATA_BOOLEAN, dims, strides);
        pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
        Desc masked = virt(CUDNN_DATA_FLOAT, dims, strides);
        pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, neg_big, keep, masked);
        return masked;
    }

    const std::vector<Desc>& ops() const { return ops_; }

private:
    void add(Desc op, const char* what) {
        d_.finalize(op, what);
        ops_.push_back(op);
    }

    Descriptors& d_;
    std::vector<Desc> ops_;
    int64_t next_virtual_ = kFirstVirtual;
};

// Shapes of one attention call, as the graph sees them (BHSD views of the interleaved buffers). Grouped-query
// attention: K and V (and dK, dV) have KV heads, Q/O NH; the matmuls broadcast kv head h / (NH/KV) to query
// head h (cudnn-frontend's GQA), and the backward sums each group's per-query-head dK/dV with a reduction.
struct Shape {
    int64_t B, T, C, NH, KV, HS;
    int64_t C3() const { return C + 2 * KV * HS; }                         // a qkv row: q, k, v
    Dims qkv_strides() const { return {T * C3(), HS, C3(), 1}; }            // Q (B,NH,T,HS); K, V (B,KV,T,HS)
    Dims qkv_t_strides() const { return {T * C3(), HS, 1, C3()}; }         // K^T, V^T: (B, KV, HS, T)
    Dims out_strides() const { return {T * C, HS, C, 1}; }                 // O, dO: (B, NH, T, HS)
    Dims bhsd() const { return {B, NH, T, HS}; }
    Dims kv_bhsd() const { return {B, KV, T, HS}; }
    Dims kv_bhds() const { return {B, KV, HS, T}; }
    Dims scores() const { return {B, NH, T, T}; }
    Dims scores_strides() const { return {NH * T * T, T * T, T, 1}; }
    Dims scores_t_strides() const { return {NH * T * T, T * T, 1, T}; }       // the same buffer transposed
    Dims rows() const { return {B, NH, T, 1}; }
    Dims rows_strides() const { return {NH * T, T, 1, 1}; }
};

// S = scale * Q K^T, causally masked; shared by both directions.
Desc masked_scores(GraphBuilder& g, const Shape& sh, Desc q, Desc kt, Desc scale, Desc neg_big) {
    Desc s = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.matmul(q, kt, s);
    Desc scaled = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_MUL, s, scale, scaled);
    return g.causal_mask(scaled, sh.scores(), sh.scores_strides(), neg_big);
}

// A key or value gradient, grad (B,KV,T,HS) = x^T y: x (B,NH,T,T) fp32 scores seen transposed as bf16, y a
// (B,NH,T,HS) operand. With KV < NH the product is first formed per query head (virtual bf16 (B,NH,T,HS), as the
// frontend's dV_fullhead / dK_fullhead) and summed over each kv head's group by an ADD reduction.
void kv_gradient(GraphBuilder& g, const Shape& sh, Desc x, Desc y, Desc grad) {
    Desc x_t = g.virt(CUDNN_DATA_BFLOAT16, {sh.B, sh.NH, sh.T, sh.T}, sh.scores_t_strides());
    g.reshape(x, x_t);
    if (sh.KV == sh.NH) {
        g.matmul(x_t, y, grad);
        return;
    }
    const Dims full_strides = {sh.NH * sh.T * sh.HS, sh.T * sh.HS, sh.HS, 1};  // (B,NH,T,HS) per query head
    Desc full = g.virt(CUDNN_DATA_BFLOAT16, sh.bhsd(), full_strides);
    g.matmul(x_t, y, full);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, grad);
}

// The tensors both directions read first, created in this order: Q and K^T from the packed qkv rows, V (the
// forward's (B,KV,T,HS) or the backward's transposed (B,KV,HS,T) view, v_dims and v_strides) and O.
struct QkvoTensors {
    Desc q, kt, v, o;
};
QkvoTensors qkvo_tensors(GraphBuilder& g, const Shape& sh, const Dims& v_dims, const Dims& v_strides) {
    Desc q = g.tensor(kQ, CUDNN_DATA_BFLOAT16, sh.bhsd(), sh.qkv_strides());
    Desc kt = g.tensor(kK, CUDNN_DATA_BFLOAT16, sh.kv_bhds(), sh.qkv_t_strides());
    Desc v = g.tensor(kV, CUDNN_DATA_BFLOAT16, v_dims, v_strides);
    Desc o = g.tensor(kO, CUDNN_DATA_BFLOAT16, sh.bhsd(), sh.out_strides());
    return {q, kt, v, o};
}

// Forward: O = softmax(S) V, and Stats = max + log(sum(exp(S - max))) per row (the natural-log LSE).
// The softmax is the frontend's composite (max, sub, exp, sum, log, add, div); P is bf16 for the second GEMM.
void build_forward(GraphBuilder& g, const Shape& sh) {
    auto [q, kt, v, o] = qkvo_tensors(g, sh, sh.kv_bhsd(), sh.qkv_strides());
    Desc stats = g.tensor(kStats, CUDNN_DATA_FLOAT, sh.rows(), sh.rows_strides());
    Desc scale = g.scalar(kScale), neg_big = g.scalar(kNegBig);

    Desc s = masked_scores(g, sh, q, kt, scale, neg_big);
    Desc row_max = g.virt(CUDNN_DATA_FLOAT, sh.rows(), sh.rows_strides());
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, row_max);
    Desc centered = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_SUB, s, row_max, centered);
    Desc e = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_EXP, centered, nullptr, e);
    Desc sum = g.virt(CUDNN_DATA_FLOAT, sh.rows(), sh.rows_strides());
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
    Desc log_sum = g.virt(CUDNN_DATA_FLOAT, sh.rows(), sh.rows_strides());
    g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, log_sum);
    g.pointwise(CUDNN_POINTWISE_ADD, row_max, log_sum, stats);
    Desc p = g.virt(CUDNN_DATA_BFLOAT16, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_DIV, e, sum, p);
    g.matmul(p, v, o);
}

// Backward (no dropout), as the frontend's SDPA backward node: D = rowsum(dO * O); P = exp(S - Stats);
// dV = P^T dO; dS = scale * P * (dO V^T - D); dK = dS^T Q; dQ = dS K, accumulated in a non-virtual fp32
// F16x16-reordered tensor (how the graph asks for the engine's atomic dQ path) and converted to bf16. With
// KV < NH, dV and dK are first formed per query head (virtual bf16 (B,NH,T,HS), as the frontend's
// dV_fullhead / dK_fullhead) and summed over each kv head's group by an ADD reduction to (B,KV,T,HS).
void build_backward(GraphBuilder& g, const Shape& sh) {
    auto [q, kt, vt, o] = qkvo_tensors(g, sh, sh.kv_bhds(), sh.qkv_t_strides());
    Desc d_o = g.tensor(kDO, CUDNN_DATA_BFLOAT16, sh.bhsd(), sh.out_strides());
    Desc stats = g.tensor(kStats, CUDNN_DATA_FLOAT, sh.rows(), sh.rows_strides());
    Desc dq = g.tensor(kDQ, CUDNN_DATA_BFLOAT16, sh.bhsd(), sh.qkv_strides());
    Desc dk = g.tensor(kDK, CUDNN_DATA_BFLOAT16, sh.kv_bhsd(), sh.qkv_strides());
    Desc dv = g.tensor(kDV, CUDNN_DATA_BFLOAT16, sh.kv_bhsd(), sh.qkv_strides());
    const int64_t NH = sh.NH, T = sh.T, HS = sh.HS;
    Desc dq_accum = g.tensor(kDQAccum, CUDNN_DATA_FLOAT, sh.bhsd(), {NH * T * HS, T * HS, HS, 1}, false, false, true);
    Desc scale = g.scalar(kScale), neg_big = g.scalar(kNegBig), one = g.scalar(kOne);

    // D: the frontend gives the dO*O product these (virtual, so immaterial) strides; kept as it emits them.
    Desc dout_out = g.virt(CUDNN_DATA_FLOAT, sh.bhsd(), {NH * T * HS, T * HS, NH * HS, 1});
    g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, dout_out);
    Desc d_rows = g.virt(CUDNN_DATA_FLOAT, sh.rows(), sh.rows_strides());
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dout_out, d_rows);
    Desc d = g.virt(CUDNN_DATA_FLOAT, sh.rows(), sh.rows_strides());
    g.pointwise(CUDNN_POINTWISE_MUL, d_rows, one, d);  // the dropout-scale slot (1 without dropout)

    Desc s = masked_scores(g, sh, q, kt, scale, neg_big);
    Desc centered = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_SUB, s, stats, centered);
    Desc p = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_EXP, centered, nullptr, p);

    kv_gradient(g, sh, p, d_o, dv);  // dV = P^T dO

    Desc dp = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.matmul(d_o, vt, dp);
    Desc dp_masked = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_MUL, dp, one, dp_masked);  // the dropout-mask slot
    Desc dp_centered = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_SUB, dp_masked, d, dp_centered);
    Desc ds_unscaled = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_MUL, dp_centered, p, ds_unscaled);
    Desc ds = g.virt(CUDNN_DATA_FLOAT, sh.scores(), sh.scores_strides());
    g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, scale, ds);

    kv_gradient(g, sh, ds, q, dk);  // dK = dS^T Q

    Desc k = g.virt(CUDNN_DATA_FLOAT, sh.kv_bhsd(), sh.qkv_strides());  // K^T seen as K (the frontend's dtype)
    g.reshape(kt, k);
    g.matmul(ds, k, dq_accum);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, dq);
}

// ---- Plans, cached per device and shape ---------------------------------------------------------------------

enum Direction { kForward = 0, kBackward = 1 };

struct Plan {
    std::unique_ptr<Descriptors> descs;  // the graph's descriptors, alive as long as the plan
    Desc plan = nullptr;
    int64_t workspace = 0;
    // By-value scalars: the variant pack passes their host addresses.
    float scale = 0, one = 1, neg_big = std::numeric_limits<float>::lowest();
};

// Operation graph -> heuristics (mode A, then the fallback list) -> the first engine config whose plan
// finalizes. Throws PlanError with the last rejection when none does.
void finalize_plan(Descriptors& d, const GraphBuilder& g, cudnnHandle_t handle, Plan& out) {
    Desc graph = d.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    d.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.ops().data(),
          static_cast<int64_t>(g.ops().size()));
    d.set(graph, kGraphHandle, CUDNN_TYPE_HANDLE, &handle);
    d.finalize(graph, "operation graph");
    std::string last = "no engine config offered";
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        Desc heur = d.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        d.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &graph);
        d.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
        const cudnnStatus_t hst = d.api().finalize(heur);
        if (hst != CUDNN_STATUS_SUCCESS) {
            last = "engine heuristics: " + d.api().describe(hst);
            continue;
        }
        int64_t n = 0;
        d.check(d.api().get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr),
                "engine heuristics count");
        if (n <= 0) continue;
        std::vector<Desc> cfgs(static_cast<size_t>(n));
        for (auto& c : cfgs) c = d.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        d.check(
            d.api().get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &n, cfgs.data()),
            "engine heuristics results");
        for (int64_t i = 0; i < n; i++) {
            Desc plan = d.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
            d.set(plan, kPlanHandle, CUDNN_TYPE_HANDLE, &handle);
            d.set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cfgs[i]);
            const cudnnStatus_t st = d.api().finalize(plan);
            if (st != CUDNN_STATUS_SUCCESS) {
                last = "execution plan: " + d.api().describe(st);
                continue;
            }
            int64_t ws = 0, cnt = 0;
            d.check(d.api().get_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt, &ws),
                    "plan workspace size");
            out.plan = plan;
            out.workspace = ws;
            return;
        }
    }
    throw PlanError(last);
}

struct DeviceState {
    std::mutex mu;  // held for plan building and for each call's set-stream + execute
    cudnnHandle_t handle = nullptr;
    void* ws = nullptr;
    size_t ws_cap = 0;
    std::map<std::tuple<int, int, int, int, int, int>, std::unique_ptr<Plan>> plans;  // null: shape unsupported
};

// Per-device state, created on first use and never destroyed (destroying cuDNN handles from static
// destructors could run after the CUDA runtime has unloaded; the driver frees everything at exit).
DeviceState& device_state(int dev) {
    static std::mutex mu;
    static auto* states = new std::vector<std::unique_ptr<DeviceState>>;
    std::lock_guard<std::mutex> lock(mu);
    if (static_cast<int>(states->size()) <= dev) states->resize(static_cast<size_t>(dev) + 1);
    auto& s = (*states)[static_cast<size_t>(dev)];
    if (!s) s = std::make_unique<DeviceState>();
    return *s;
}

// The cached plan for this shape, built on first use; nullptr (with the reason noted) if cuDNN cannot run it.
// Called with st.mu held.
Plan* get_plan(const Api& a, DeviceState& st, Direction dir, const Shape& sh) {
    const auto key = std::make_tuple(static_cast<int>(dir), static_cast<int>(sh.B), static_cast<int>(sh.T),
                                     static_cast<int>(sh.C), static_cast<int>(sh.NH), static_cast<int>(sh.KV));
    auto it = st.plans.find(key);
    if (it != st.plans.end()) return it->second.get();
    std::unique_ptr<Plan> plan;
    try {
        if (!st.handle) {
            cudnnHandle_t h = nullptr;
            const cudnnStatus_t cs = a.create(&h);
            if (cs != CUDNN_STATUS_SUCCESS) throw PlanError("cudnnCreate: " + a.describe(cs));
            st.handle = h;
        }
        plan = std::make_unique<Plan>();
        plan->descs = std::make_unique<Descriptors>(a);
        plan->scale = 1.0f / std::sqrt(static_cast<float>(sh.HS));
        GraphBuilder g(*plan->descs);
        if (dir == kForward) build_forward(g, sh);
        else build_backward(g, sh);
        finalize_plan(*plan->descs, g, st.handle, *plan);
    } catch (const PlanError& e) {
        note_unavailable(fmt::format("cuDNN {} cannot plan the {} for B={} T={} C={} NH={} KV={}: {}", a.version,
                                     dir == kForward ? "forward" : "backward", sh.B, sh.T, sh.C, sh.NH, sh.KV,
                                     e.what()));
        plan.reset();
    }
    Plan* p = plan.get();
    st.plans.emplace(key, std::move(plan));
    return p;
}

// Grow-only device workspace; the old buffer is freed only after the device is idle (earlier launches
// may still use it). Called with st.mu held.
void* workspace(DeviceState& st, size_t bytes) {
    if (bytes > st.ws_cap) {
        if (st.ws) {
            LLMT_CUDA_CHECK(cudaDeviceSynchronize());
            LLMT_CUDA_CHECK(cudaFree(st.ws));
            st.ws = nullptr;
            st.ws_cap = 0;
        }
        LLMT_CUDA_CHECK(cudaMalloc(&st.ws, bytes));
        st.ws_cap = bytes;
    }
    return st.ws;
}

void execute(const Api& a, DeviceState& st, const Plan& p, const char* op, cudaStream_t s,
             const std::vector<int64_t>& uids, const std::vector<void*>& ptrs, void* ws) {
    auto fail = [&](const char* step, cudnnStatus_t status) {
        throw DeviceError(fmt::format("{}: {} failed: {}", op, step, a.describe(status)));
    };
    cudnnStatus_t rc = a.set_stream(st.handle, s);
    if (rc != CUDNN_STATUS_SUCCESS) fail("cudnnSetStream", rc);
    Desc pack = nullptr;
    rc = a.create_desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (rc != CUDNN_STATUS_SUCCESS) fail("creating the variant pack", rc);
    const auto n = static_cast<int64_t>(uids.size());
    rc = a.set_attr(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data());
    if (rc == CUDNN_STATUS_SUCCESS)
        rc = a.set_attr(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs.data());
    if (rc == CUDNN_STATUS_SUCCESS)
        rc = a.set_attr(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (rc == CUDNN_STATUS_SUCCESS) rc = a.finalize(pack);
    if (rc == CUDNN_STATUS_SUCCESS) rc = a.execute(st.handle, p.plan, pack);
    a.destroy_desc(pack);
    if (rc != CUDNN_STATUS_SUCCESS) fail("cudnnBackendExecute", rc);
}

// Shapes the graph supports (cuDNN: head size a multiple of 8, at most 128 for the backward) and the 16-byte
// alignment the tensor descriptors promise. False with a note otherwise.
bool supported(int B, int T, int C, int NH, int KV, std::initializer_list<const void*> ptrs) {
    if (B <= 0 || T <= 0 || NH <= 0 || KV <= 0 || C <= 0 || C % NH != 0 || NH % KV != 0) {
        note_unavailable(fmt::format("invalid shape B={} T={} C={} NH={} KV={}", B, T, C, NH, KV));
        return false;
    }
    const int hs = C / NH;
    if (hs % 8 != 0 || hs > 128) {
        note_unavailable(fmt::format("head size {} is not a multiple of 8 up to 128", hs));
        return false;
    }
    for (const void* p : ptrs) {
        if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
            note_unavailable("a buffer is not 16-byte aligned");
            return false;
        }
    }
    return true;
}

constexpr size_t kAlign = 256;
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

size_t cudnn_attention_library_version() {
    const Api* a = api();
    return a ? a->version : 0;
}

bool cudnn_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH,
                             int KV, cudaStream_t s) {
    const int64_t kv_off = C + static_cast<int64_t>(KV) * (NH > 0 ? C / NH : 0);  // v's channel offset
    if (!supported(B, T, C, NH, KV, {out, lse, qkv, qkv + C, qkv + kv_off})) return false;
    const Api* a = api();
    int dev = 0;
    if (!a || cudaGetDevice(&dev) != cudaSuccess) return false;
    DeviceState& st = device_state(dev);
    std::lock_guard<std::mutex> lock(st.mu);
    const Shape sh{B, T, C, NH, KV, C / NH};
    Plan* p = get_plan(*a, st, kForward, sh);
    if (!p) return false;
    void* ws = p->workspace > 0 ? workspace(st, static_cast<size_t>(p->workspace)) : nullptr;
    auto* x = const_cast<__nv_bfloat16*>(qkv);
    execute(*a, st, *p, "cudnn_attention_forward", s, {kQ, kK, kV, kO, kStats, kScale, kNegBig},
            {x, x + C, x + kv_off, out, lse, &p->scale, &p->neg_big}, ws);
    return true;
}

bool cudnn_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                              const __nv_bfloat16* out, const float* lse, int B, int T, int C, int NH, int KV,
                              cudaStream_t s) {
    const int64_t kv_off = C + static_cast<int64_t>(KV) * (NH > 0 ? C / NH : 0);  // v's channel offset
    if (!supported(B, T, C, NH, KV, {dqkv, dqkv + C, dqkv + kv_off, dout, qkv, qkv + C, qkv + kv_off, out, lse}))
        return false;
    const Api* a = api();
    int dev = 0;
    if (!a || cudaGetDevice(&dev) != cudaSuccess) return false;
    DeviceState& st = device_state(dev);
    std::lock_guard<std::mutex> lock(st.mu);
    const Shape sh{B, T, C, NH, KV, C / NH};
    Plan* p = get_plan(*a, st, kBackward, sh);
    if (!p) return false;
    // Workspace: cuDNN's own, then the fp32 dQ accumulator the engine adds into. From cuDNN 9.6 the engine
    // zeroes it itself (cudnn-frontend stopped its memset there); before, we must (~35 us at B=32 on an H100).
    const size_t own = round_up(static_cast<size_t>(p->workspace));
    const size_t accum_bytes = static_cast<size_t>(B) * T * C * sizeof(float);
    char* ws = static_cast<char*>(workspace(st, own + accum_bytes));
    if (a->version < 90600) LLMT_CUDA_CHECK(cudaMemsetAsync(ws + own, 0, accum_bytes, s));
    auto* x = const_cast<__nv_bfloat16*>(qkv);
    execute(*a, st, *p, "cudnn_attention_backward", s,
            {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kScale, kNegBig, kOne, kDQAccum},
            {x, x + C, x + kv_off, const_cast<__nv_bfloat16*>(out), const_cast<__nv_bfloat16*>(dout),
             const_cast<float*>(lse), dqkv, dqkv + C, dqkv + kv_off, &p->scale, &p->neg_big, &p->one, ws + own},
            p->workspace > 0 ? ws : nullptr);
    return true;
}

}  // namespace llmt::kernels::cuda
