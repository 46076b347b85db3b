#!/usr/bin/env python3
"""Generates burn-swap/src/backend/ops/: the op traits of `Swap<I>`, one file per family.

Reads the op traits of burn-backend and the impls of burn-router (the versions in Cargo.lock,
from cargo's registry source folder) and writes, for every trait method:

- a forward to `BackendRouter<SwapChannel<I>>` when burn-router implements the method: the op
  travels as `OperationIr` through the swap client (traced, budgeted, replayable); for the
  common ops listed in `BUILT`, burn-swap's own builder (`backend/build.rs`) makes the same
  `OperationIr` from burn-ir's constructors and runs it through `SwapClient::run_one`, without
  burn-router's per-op list of outputs and second clone of the client;
- a native call on the inner backend `I` when burn-router leaves it to the trait's default
  composition (activations, sorts, layer norm, ...): the swap client fetches the inputs, hands
  their handles to `I`'s own implementation and registers the outputs, so values are `I`'s bit
  for bit, whatever `I` overrides;
- nothing (the trait default) when neither fits (quantized and asynchronous methods).

Every written method first enters an op of `backend/in_flight.rs` (a drop on another thread
waits for the ops in flight: see that module).

`float_into_data`, `int_into_data` and `bool_into_data` are written by hand below: burn-router
converts the data to the backend's default element type, `I` does not.

Run from the repository root after changing the Burn version: python3 scripts/gen_forward.py
"""
import glob
import os
import re
import sys

VERSION = "0.21.0"
cargo_home = os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo")
registry = glob.glob(os.path.join(cargo_home, "registry/src/*/"))
def src(crate):
    for r in registry:
        p = os.path.join(r, f"{crate}-{VERSION}")
        if os.path.isdir(p):
            return p
    sys.exit(f"{crate}-{VERSION} not found; run `cargo fetch` first")

BACKEND = src("burn-backend") + "/src/backend/ops/"
ROUTER = src("burn-router") + "/src/ops/"
TRAITS = [
    ("FloatTensorOps", [BACKEND + "tensor.rs"], ROUTER + "tensor.rs"),
    ("IntTensorOps", [BACKEND + "int_tensor.rs"], ROUTER + "int_tensor.rs"),
    ("BoolTensorOps", [BACKEND + "bool_tensor.rs"], ROUTER + "bool_tensor.rs"),
    ("ModuleOps", [BACKEND + "modules/base.rs"], ROUTER + "module.rs"),
    ("ActivationOps", [BACKEND + "activation.rs"], ROUTER + "activation.rs"),
    ("QTensorOps", [BACKEND + "qtensor.rs"], ROUTER + "qtensor.rs"),
    ("TransactionOps", [BACKEND + "transaction.rs"], ROUTER + "transaction.rs"),
]
# Native ops whose outputs' size follows from their arguments, not from their inputs: the
# engine makes room for exactly that before they run (`NativeOp::with_output_bytes`).
EXPECT = {
    "int_full": "output_bytes::shape(&shape, dtype.into())",
    "int_arange": "output_bytes::arange(&range, 1, dtype.into())",
    "int_arange_step": "output_bytes::arange(&range, step, dtype.into())",
    "rfft": "output_bytes::rfft(&burn_backend::TensorMetadata::shape(&signal), burn_backend::TensorMetadata::dtype(&signal), dim, n)",
    "irfft": "output_bytes::irfft(&burn_backend::TensorMetadata::shape(&spectrum_re), burn_backend::TensorMetadata::dtype(&spectrum_re), dim, n)",
    "q_from_data": "data.bytes.len() as u64",
    "dequantize": "output_bytes::shape(&burn_backend::TensorMetadata::shape(&tensor), dtype.into())",
    "unfold4d": "output_bytes::unfold4d(&burn_backend::TensorMetadata::shape(&x), burn_backend::TensorMetadata::dtype(&x), kernel_size, &options)",
}
# Ops that make bools: a comparison broadcasts its operands, and a bool can be wider than
# the element it was made from (CubeCL's u32 bools from f16 values).
_shape = "&burn_backend::TensorMetadata::shape(&{})"
for name, args, dtype in [
    ("float_not_equal", ("lhs", "rhs"), "out_dtype.into()"),
    ("int_not_equal", ("lhs", "rhs"), "out_dtype.into()"),
    ("float_not_equal_elem", ("lhs",), "out_dtype.into()"),
    ("int_not_equal_elem", ("lhs",), "out_dtype.into()"),
    ("float_is_nan", ("tensor",), "out_dtype.into()"),
    ("float_is_inf", ("tensor",), "out_dtype.into()"),
    ("float_any", (), "out_dtype.into()"),
    ("float_all", (), "out_dtype.into()"),
    ("int_any", (), "out_dtype.into()"),
    ("int_all", (), "out_dtype.into()"),
    ("float_any_dim", ("tensor",), "out_dtype.into()"),
    ("float_all_dim", ("tensor",), "out_dtype.into()"),
    ("int_any_dim", ("tensor",), "out_dtype.into()"),
    ("int_all_dim", ("tensor",), "out_dtype.into()"),
    ("bool_not_equal", ("lhs", "rhs"), "burn_backend::TensorMetadata::dtype(&lhs)"),
    ("bool_xor", ("lhs", "rhs"), "burn_backend::TensorMetadata::dtype(&lhs)"),
]:
    shapes = ", ".join(_shape.format(a) for a in args)
    EXPECT[name] = f"output_bytes::broadcast(&[{shapes}], {dtype})"
# A quantized select or gather picks as many rows or values as it has indices, more than
# its input holds when some are picked more than once.
EXPECT["q_select"] = (
    "output_bytes::select(&burn_backend::TensorMetadata::shape(&tensor), "
    "burn_backend::TensorMetadata::dtype(&tensor), dim, "
    "&burn_backend::TensorMetadata::shape(&indices))"
)
EXPECT["q_gather"] = (
    "output_bytes::gather(&burn_backend::TensorMetadata::shape(&indices), "
    "burn_backend::TensorMetadata::dtype(&tensor))"
)
# A block-quantized expand is made anew at its larger shape (blocks do not broadcast as a
# view), more than its input holds.
EXPECT["q_expand"] = (
    "output_bytes::quantized_expand(&burn_backend::TensorMetadata::shape(&tensor), &shape, "
    "burn_backend::TensorMetadata::dtype(&tensor))"
)
# A quantized tensor is a quarter of the float tensor it is made from (8-bit values) or
# less, plus its quantization parameters: room for what it is, not for another float tensor.
EXPECT["quantize_dynamic"] = (
    "output_bytes::quantized(&burn_backend::TensorMetadata::shape(&tensor), scheme)"
)
# A transposed convolution's input gradient can outgrow both its inputs (many channels
# narrowed to few): its shape follows from the weight's, the output gradient's and the options.
for d in (1, 2, 3):
    EXPECT[f"conv_transpose{d}d_x_backward"] = (
        "output_bytes::conv_transpose_x(&burn_backend::TensorMetadata::shape(&weight), "
        "&burn_backend::TensorMetadata::shape(&output_grad), "
        "burn_backend::TensorMetadata::dtype(&output_grad), &options)"
    )

# Methods burn-router implements as `todo!()` / `unimplemented!()`: the FFTs, and the
# quantized ops it declares (the other `QTensorOps` methods are the trait's defaults, which
# dequantize through these).
Q_NATIVE = {"q_from_data", "quantize_dynamic", "dequantize", "q_reshape", "q_expand",
            "q_swap_dims", "q_permute", "q_flip", "q_select", "q_slice", "q_gather"}
UNROUTED = {"rfft", "irfft"} | Q_NATIVE

HAND_WRITTEN = {"float_into_data", "int_into_data", "bool_into_data", "quantize", "q_into_data", "q_device", "q_to_device",
                "float_transpose", "int_transpose", "bool_transpose"}

def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)

def backend_structs():
    """The output structs of ModuleOps (`Name<B: Backend>` with tensor fields)."""
    text = strip_comments(open(BACKEND + "modules/base.rs").read())
    out = {}
    for m in re.finditer(r"pub struct (\w+)<B: Backend> \{(.*?)\n\}", text, re.S):
        fields = re.findall(r"pub (\w+):\s*([^,]+),", m.group(2))
        out[m.group(1)] = [(f, " ".join(t.split()).replace("<B>", "<Self>")) for f, t in fields]
    return out

STRUCTS = backend_structs()

def struct_of(t):
    m = re.fullmatch(r"(\w+)<Self>", t)
    return m.group(1) if m and m.group(1) in STRUCTS else None

def trait_body(text, trait):
    start = text.index(f"pub trait {trait}<")
    i = text.index("{", start)
    depth, j = 0, i
    while True:
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
        j += 1

def methods(body):
    """Yields (name, generics, params, ret, where) of every method."""
    i = 0
    while True:
        m = re.compile(r"\bfn\s+(\w+)").search(body, i)
        if not m:
            return
        j = m.end()
        depth = 0
        k = j
        while True:
            c = body[k]
            if c in "(<[":
                depth += 1
            elif c in ")>]":
                if not (c == ">" and body[k - 1] == "-"):
                    depth -= 1
            elif depth == 0 and c in ";{":
                break
            k += 1
        sig = body[j:k]
        end = k + 1
        if body[k] == "{":
            d = 0
            while True:
                if body[end - 1] == "{":
                    d += 1
                elif body[end - 1] == "}":
                    d -= 1
                    if d == 0:
                        break
                end += 1
        i = end
        name = m.group(1)
        generics = ""
        s = sig.strip()
        if s.startswith("<"):
            d = 0
            for n, c in enumerate(s):
                d += c == "<"
                d -= c == ">"
                if d == 0:
                    generics, s = s[: n + 1], s[n + 1 :].strip()
                    break
        assert s.startswith("("), (name, s)
        d = 0
        for n, c in enumerate(s):
            d += c == "("
            d -= c == ")"
            if d == 0:
                params, rest = s[1:n], s[n + 1 :].strip()
                break
        ret, where = "", ""
        if rest.startswith("->"):
            rest = rest[2:].strip()
            w = re.search(r"\bwhere\b", rest)
            ret, where = (rest[: w.start()].strip(), rest[w.start():]) if w else (rest, "")
        elif rest.startswith("where"):
            where = rest
        yield name, generics, params, ret, where

def split_top(text):
    out, depth, cur = [], 0, ""
    for c in text:
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur)
    return [p.strip() for p in out if p.strip()]

def selfify(t):
    t = " ".join(t.split()).replace("crate::", "burn_backend::")
    return re.sub(r"\bB\b", "Self", t)

KINDS = {"FloatTensor<Self>": "float", "IntTensor<Self>": "int", "BoolTensor<Self>": "bool", "QuantizedTensor<Self>": "quantized"}

def arg_kind(t):
    if t in KINDS:
        return ("one", KINDS[t])
    m = re.fullmatch(r"Option<(\w+Tensor<Self>)>", t)
    if m and m.group(1) in KINDS:
        return ("opt", KINDS[m.group(1)])
    m = re.fullmatch(r"Vec<(\w+Tensor<Self>)>", t)
    if m and m.group(1) in KINDS:
        return ("vec", KINDS[m.group(1)])
    if "Tensor<Self>" in t or "TensorPrimitive" in t or "impl " in t or "Self" in t.replace("Device<Self>", ""):
        return None
    return ("pass", None)

def ret_plan(t):
    if t in KINDS:
        return ("one", [KINDS[t]])
    name = struct_of(t)
    if name:
        fields = []
        for f, ft in STRUCTS[name]:
            k = arg_kind(ft)
            if k is None or k[0] == "pass" or k[0] == "vec":
                return None
            fields.append((f, k))
        return ("struct", [name, fields])
    m = re.fullmatch(r"\((.*)\)", t)
    if m:
        parts = split_top(m.group(1))
        if parts and all(p in KINDS for p in parts):
            return ("tuple", [KINDS[p] for p in parts])
        return None
    m = re.fullmatch(r"Vec<(\w+Tensor<Self>)>", t)
    if m and m.group(1) in KINDS:
        return ("vec", [KINDS[m.group(1)]])
    if "Tensor" in t or "Self" in t.replace("Device<Self>", "") or "impl " in t:
        return None
    return ("pass", [])

def native(trait, name, generics, params, ret, where):
    args = []
    for p in split_top(params):
        pat, ty = p.split(":", 1)
        pat = pat.strip().removeprefix("mut ").strip()
        kind = arg_kind(selfify(ty))
        if kind is None:
            return None
        args.append((pat, selfify(ty), kind))
    plan = ret_plan(selfify(ret)) if ret else ("pass", [])
    if plan is None:
        return None
    client = None
    for pat, ty, (k, _) in args:
        if k == "one":
            # A quantized tensor is Swap's own wrapper around burn-router's tensor.
            inner = ".tensor" if ty == "QuantizedTensor<Self>" else ""
            client = f"{pat}{inner}.client.clone()"
            break
    if client is None:
        for pat, ty, _ in args:
            if ty == "&Device<Self>":
                client = f"get_client::<SwapChannel<I>>({pat})"
                break
    if client is None:
        return None
    if plan[0] == "pass" and not any(k in ("one", "opt", "vec") for _, _, (k, _) in args):
        return None
    sig = ", ".join(f"{pat}: {ty}" for pat, ty, _ in args)
    out = [f"    fn {name}{generics}({sig})" + (f" -> {selfify(ret)}" if ret else "") + (f" {where}" if where else "") + " {"]
    has_inputs = any(k in ("one", "opt", "vec") for _, _, (k, _) in args)
    binding = "let mut op" if has_inputs else "let op"
    output = f".with_output_bytes({EXPECT[name]})" if name in EXPECT else ""
    out.append(f'        {binding} = NativeOp::new("{name}", {client}){output};')
    for pat, ty, (k, kind) in args:
        if k == "one":
            out.append(f"        let {pat} = op.ir({pat});")
        elif k == "opt":
            out.append(f"        let {pat} = {pat}.map(|t| op.ir(t));")
        elif k == "vec":
            out.append(f"        let {pat}: Vec<_> = {pat}.into_iter().map(|t| op.ir(t)).collect();")
    out.append("        op.run(|ctx| {")
    for pat, ty, (k, kind) in args:
        if k == "one":
            out.append(f"            let {pat} = ctx.{kind}({pat});")
        elif k == "opt":
            out.append(f"            let {pat} = {pat}.map(|t| ctx.{kind}(t));")
        elif k == "vec":
            out.append(f"            let {pat}: Vec<_> = {pat}.into_iter().map(|t| ctx.{kind}(t)).collect();")
    call_args = ", ".join(pat for pat, _, _ in args)
    out.append(f"            let out = <I as {trait}<I>>::{name}({call_args});")
    kind, kinds = plan
    if kind == "one":
        out.append(f"            ctx.{kinds[0]}_out(out)")
    elif kind == "tuple":
        names = [f"o{i}" for i in range(len(kinds))]
        out.append(f"            let ({', '.join(names)}) = out;")
        out.append("            (" + ", ".join(f"ctx.{k}_out({n})" for k, n in zip(kinds, names)) + ")")
    elif kind == "vec":
        out.append(f"            out.into_iter().map(|t| ctx.{kinds[0]}_out(t)).collect()")
    elif kind == "struct":
        name, fields = kinds
        conv = []
        for f, (k, fk) in fields:
            conv.append(f"{f}: ctx.{fk}_out(out.{f})" if k == "one" else f"{f}: out.{f}.map(|t| ctx.{fk}_out(t))")
        out.append(f"            {name} {{ " + ", ".join(conv) + " }")
    else:
        out.append("            out")
    out.append("        })")
    out.append("    }")
    return "\n".join(out)

def method_head(name, generics, args, ret, where):
    """A method's first line (up to its body) from its arguments `(pattern, type)`."""
    sig = ", ".join(f"{pat}: {ty}" for pat, ty in args)
    return f"    fn {name}{generics}({sig})" + (f" -> {ret}" if ret else "") + (f" {where}" if where else "")

def forward(trait, name, generics, params, ret, where):
    """A forward to burn-router, or None when a type would need converting."""
    args = []
    for p in split_top(params):
        pat, ty = p.split(":", 1)
        pat = pat.strip().removeprefix("mut ").strip()
        ty = selfify(ty)
        if arg_kind(ty) is None and not re.fullmatch(r"&?(Quantized|Float|Int|Bool)Tensor<Self>|(Option|Vec)<(Quantized|Float|Int|Bool)Tensor<Self>>", ty):
            return None
        args.append((pat, ty))
    ret = selfify(ret) if ret else ""
    head = method_head(name, generics, args, ret, where)
    call = f"<R<I> as {trait}<R<I>>>::{name}(" + ", ".join(p for p, _ in args) + ")"
    struct = struct_of(ret)
    if struct:
        fields = ", ".join(f"{f}: out.{f}" for f, _ in STRUCTS[struct])
        return f"{head} {{\n        let out = {call};\n        {struct} {{ {fields} }}\n    }}"
    return f"{head} {{\n        {call}\n    }}"

# The common ops, built here rather than forwarded: burn-swap's own builders
# (`backend/build.rs`) make the same `OperationIr` from burn-ir's constructors and run it through
# `SwapClient::run_one`, without burn-router's list of outputs per op and its second clone of
# the client (*Measurements*, "Own builders for the common ops"). Method -> (builder, the op made
# of the builder's description `d`). A method here that burn-router does not route stays
# native. The ops are the ones Burn's IR gives each method; every model test compares the
# values with the unwrapped backend's, bit for bit.
def _numeric(kind, op):
    return f"OperationIr::Numeric{kind}(d.out.dtype, NumericOperationIr::{op}(d))"
BUILT = {}
for kind, prefix in [("Float", "float"), ("Int", "int")]:
    for op, name in [("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div"),
                     ("Rem", "remainder"), ("Powi", "powi")]:
        # `float_powi` takes an int exponent that burn-ir's binary description refuses
        # (one dtype on both sides): it stays burn-router's.
        if (prefix, name) != ("float", "powi"):
            BUILT[f"{prefix}_{name}"] = ("binary", _numeric(kind, op))
    for op, name in [("AddScalar", "add_scalar"), ("SubScalar", "sub_scalar"),
                     ("MulScalar", "mul_scalar"), ("DivScalar", "div_scalar"),
                     ("RemScalar", "remainder_scalar"), ("PowiScalar", "powi_scalar_impl")]:
        BUILT[f"{prefix}_{name}"] = ("scalar", _numeric(kind, op))
    BUILT[f"{prefix}_abs"] = ("unary", _numeric(kind, "Abs"))
for op, name in [("Exp", "exp"), ("Log", "log"), ("Log1p", "log1p"), ("Sqrt", "sqrt"),
                 ("Cos", "cos"), ("Cosh", "cosh"), ("Sin", "sin"), ("Sinh", "sinh"),
                 ("Tan", "tan"), ("Tanh", "tanh"), ("ArcCos", "acos"), ("ArcCosh", "acosh"),
                 ("ArcSin", "asin"), ("ArcSinh", "asinh"), ("ArcTan", "atan"),
                 ("ArcTanh", "atanh"), ("Round", "round"), ("Floor", "floor"), ("Ceil", "ceil"),
                 ("Trunc", "trunc"), ("Recip", "recip"), ("Erf", "erf")]:
    BUILT[f"float_{name}"] = ("unary", f"OperationIr::Float(d.out.dtype, FloatOperationIr::{op}(d))")
BUILT["float_atan2"] = ("binary", "OperationIr::Float(d.out.dtype, FloatOperationIr::ArcTan2(d))")
BUILT["float_powf"] = ("binary", "OperationIr::Float(d.out.dtype, FloatOperationIr::Powf(d))")
BUILT["float_powf_scalar_impl"] = ("scalar", "OperationIr::Float(d.out.dtype, FloatOperationIr::PowfScalar(d))")
for op, name in [("BitwiseAnd", "and"), ("BitwiseOr", "or"), ("BitwiseXor", "xor"),
                 ("BitwiseLeftShift", "left_shift"), ("BitwiseRightShift", "right_shift")]:
    BUILT[f"bitwise_{name}"] = ("binary", f"OperationIr::Int(IntOperationIr::{op}(d))")
for op, name in [("BitwiseAndScalar", "and_scalar"), ("BitwiseOrScalar", "or_scalar"),
                 ("BitwiseXorScalar", "xor_scalar")]:
    BUILT[f"bitwise_{name}"] = ("scalar", f"OperationIr::Int(IntOperationIr::{op}(d))")
BUILT["bitwise_not"] = ("unary", "OperationIr::Int(IntOperationIr::BitwiseNot(d))")
BUILT["bool_equal"] = ("binary", "OperationIr::BaseBool(BaseOperationIr::Equal(d))")
BUILT["bool_and"] = ("binary", "OperationIr::Bool(BoolOperationIr::And(d))")
BUILT["bool_or"] = ("binary", "OperationIr::Bool(BoolOperationIr::Or(d))")
BUILT["bool_not"] = ("unary", "OperationIr::Bool(BoolOperationIr::Not(d))")

# Ops of other descriptions: (builder, its tensor arguments, a closure making the op from their
# IR and the client, for its output's id).
_id = "|| c.create_empty_handle()"
BUILT["float_matmul"] = ("two", "lhs, rhs", f"|l, r, c| {{ let d = MatmulOpIr::create(l, r, {_id}); OperationIr::Float(d.out.dtype, FloatOperationIr::Matmul(d)) }}")
BUILT["float_slice"] = ("one", "tensor", f"|t, c| OperationIr::BaseFloat(BaseOperationIr::Slice(SliceOpIr::create(t, slices.into(), {_id})))")
BUILT["float_expand"] = ("one", "tensor", f"|t, c| OperationIr::BaseFloat(BaseOperationIr::Expand(ShapeOpIr::expand(t, shape, {_id})))")
BUILT["float_cast"] = ("one", "tensor", f"|t, c| OperationIr::BaseFloat(BaseOperationIr::Cast(CastOpIr::create(t, dtype.into(), {_id})))")
for op, name in [("Sum", "sum"), ("Mean", "mean")]:
    BUILT[f"float_{name}"] = ("one", "tensor", f"|t, c| {{ let d = ReduceOpIr::create(t, {_id}); OperationIr::NumericFloat(d.out.dtype, NumericOperationIr::{op}(d)) }}")
for op, name in [("SumDim", "sum_dim"), ("MeanDim", "mean_dim"), ("MaxDim", "max_dim"),
                 ("MinDim", "min_dim")]:
    BUILT[f"float_{name}"] = ("one", "tensor", f"|t, c| {{ let d = ReduceDimOpIr::create(t, dim, 1, {_id}); OperationIr::NumericFloat(d.out.dtype, NumericOperationIr::{op}(d)) }}")
BUILT["float_gather"] = ("two", "tensor, indices", f"|t, i, c| OperationIr::BaseFloat(BaseOperationIr::Gather(GatherOpIr::create(t, dim, i, {_id})))")
BUILT["float_select"] = ("two", "tensor, indices", f"|t, i, c| OperationIr::BaseFloat(BaseOperationIr::Select(SelectOpIr::create(t, dim, i, {_id})))")
BUILT["float_mask_fill"] = ("two", "tensor, mask", f"|t, m, c| OperationIr::BaseFloat(BaseOperationIr::MaskFill(MaskFillOpIr::create(t, m, value.into(), {_id})))")
BUILT["float_slice_assign"] = ("two", "tensor, value", f"|t, v, c| OperationIr::BaseFloat(BaseOperationIr::SliceAssign(SliceAssignOpIr::create(t, slices.into(), v, {_id})))")
BUILT["float_mask_where"] = ("three", "tensor, mask, value", f"|t, m, v, c| OperationIr::BaseFloat(BaseOperationIr::MaskWhere(MaskWhereOpIr::create(t, m, v, {_id})))")
BUILT["float_into_int"] = ("one", "tensor", f"|t, c| {{ let d = CastOpIr::create(t, out_dtype.into(), {_id}); OperationIr::Float(d.input.dtype, FloatOperationIr::IntoInt(d)) }}")
for op, name in [("ArgMax", "argmax"), ("ArgMin", "argmin")]:
    BUILT[f"float_{name}"] = ("one", "tensor", f"|t, c| {{ let d = ReduceDimOpIr::create_arg(t, dim, 1, out_dtype.into(), {_id}); OperationIr::NumericFloat(d.input.dtype, NumericOperationIr::{op}(d)) }}")
# Comparisons: a bool out of two floats or a float and a scalar.
for op, name in [("Greater", "greater"), ("GreaterEqual", "greater_equal"), ("Lower", "lower"),
                 ("LowerEqual", "lower_equal")]:
    BUILT[f"float_{name}"] = ("two", "lhs, rhs", f"|l, r, c| {{ let d = BinaryOpIr::create_comparison(l, r, out_dtype.into(), {_id}); OperationIr::NumericFloat(d.lhs.dtype, NumericOperationIr::{op}(d)) }}")
    BUILT[f"float_{name}_elem"] = ("one", "lhs", f"|l, c| {{ let d = ScalarOpIr::create_comparison(l, rhs.into(), out_dtype.into(), {_id}); OperationIr::NumericFloat(d.lhs.dtype, NumericOperationIr::{op}Elem(d)) }}")
BUILT["float_equal"] = ("two", "lhs, rhs", f"|l, r, c| OperationIr::BaseFloat(BaseOperationIr::Equal(BinaryOpIr::create_comparison(l, r, out_dtype.into(), {_id})))")
BUILT["float_equal_elem"] = ("one", "lhs", f"|l, c| OperationIr::BaseFloat(BaseOperationIr::EqualElem(ScalarOpIr::create_comparison(l, rhs.into(), out_dtype.into(), {_id})))")
for kind, base in [("float", "BaseFloat"), ("int", "BaseInt"), ("bool", "BaseBool")]:
    BUILT[f"{kind}_reshape"] = ("one", "tensor", f"|t, c| OperationIr::{base}(BaseOperationIr::Reshape(ShapeOpIr::reshape(t, shape, {_id})))")
    BUILT[f"{kind}_swap_dims"] = ("one", "tensor", f"|t, c| OperationIr::{base}(BaseOperationIr::SwapDims(SwapDimsOpIr::create(t, dim1, dim2, {_id})))")

def built(trait, name, generics, params, ret, where):
    """The method through one of burn-swap's own builders (`BUILT`)."""
    builder, *rest = BUILT[name]
    args = []
    for p in split_top(params):
        pat, ty = p.split(":", 1)
        args.append((pat.strip().removeprefix("mut ").strip(), selfify(ty)))
    head = method_head(name, generics, args, selfify(ret), where)
    if builder in ("one", "two", "three"):
        tensors, make = rest
        call = f"build::{builder}({tensors}, {make})"
    else:
        tensors = ", ".join(p for p, _ in args)
        call = f"build::{builder}({tensors}, |d| {rest[0]})"
    return f"{head} {{\n        {call}\n    }}"

# Burn defines a transpose as the swap of the last two dimensions (the trait's default, which
# burn-router leaves in place; Flex's own override is that same view). Routed as that IR op,
# the view a transpose makes is an ordinary one: it shares its source's buffer, and under a
# budget it can leave and be made again from its source. (Run natively, it had no recipe and
# could never leave.)
def transpose(kind, prim):
    return (f"    fn {kind}_transpose(tensor: {prim}<Self>) -> {prim}<Self> {{\n"
            "        // The swap of the last two dimensions, as an IR op (see scripts/gen_forward.py).\n"
            "        let ndims = burn_backend::TensorMetadata::shape(&tensor).num_dims();\n"
            "        if ndims < 2 {\n"
            "            return tensor;\n"
            "        }\n"
            f"        <R<I> as {kind.capitalize()}TensorOps<R<I>>>::{kind}_swap_dims(tensor, ndims - 2, ndims - 1)\n"
            "    }")

HAND = {
    "float_transpose": transpose("float", "FloatTensor"),
    "int_transpose": transpose("int", "IntTensor"),
    "bool_transpose": transpose("bool", "BoolTensor"),
    "quantize": "    fn quantize(tensor: FloatTensor<Self>, scheme: &QuantScheme, qparams: QuantizationParametersPrimitive<Self>) -> QuantizedTensor<Self> {\n        let mut op = NativeOp::new(\"quantize\", tensor.client.clone()).with_output_bytes(output_bytes::quantized(&burn_backend::TensorMetadata::shape(&tensor), scheme));\n        let tensor = op.ir(tensor);\n        let scales = op.ir(qparams.scales);\n        op.run(|ctx| {\n            let tensor = ctx.float(tensor);\n            let scales = ctx.float(scales);\n            let out = <I as QTensorOps<I>>::quantize(tensor, scheme, QuantizationParametersPrimitive { scales });\n            ctx.quantized_out(out)\n        })\n    }",
    "q_into_data": "    fn q_into_data(tensor: QuantizedTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {\n        let mut op = NativeOp::new(\"q_into_data\", tensor.tensor.client.clone());\n        // Held until the engine has taken the read (see `native::read`).\n        let held = tensor.clone();\n        let tensor = op.ir(tensor);\n        let data = op.run(|ctx| <I as QTensorOps<I>>::q_into_data(ctx.quantized(tensor)));\n        drop(held);\n        data\n    }",
    "q_device": "    fn q_device(tensor: &QuantizedTensor<Self>) -> Device<Self> {\n        tensor.tensor.client.device()\n    }",
    "q_to_device": "    fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self> {\n        crate::backend::native::q_to_device(tensor, device)\n    }",
    "float_into_data": "    fn float_into_data(tensor: FloatTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {\n        read(tensor)\n    }",
    "int_into_data": "    fn int_into_data(tensor: IntTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {\n        read(tensor)\n    }",
    "bool_into_data": "    fn bool_into_data(tensor: BoolTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {\n        read(tensor)\n    }",
}

HEADER = [
    "#![allow(unused_variables, unused_imports, dead_code, clippy::all)]",
    "",
    "use crate::backend::in_flight;",
    "use crate::backend::native::{NativeOp, output_bytes, read};",
    "use crate::backend::{Swap, SwapChannel};",
    "use burn_backend::ops::*;",
    "use burn_backend::tensor::*;",
    "use burn_backend::{Distribution, ExecutionError, Scalar, TensorData};",
    "use burn_backend::quantization::*;",
    "use crate::backend::build;",
    "use burn_ir::{BackendIr, BaseOperationIr, BoolOperationIr, FloatOperationIr, IntOperationIr, NumericOperationIr, OperationIr, ShapeOpIr, SwapDimsOpIr, MatmulOpIr, SliceOpIr, CastOpIr, ReduceOpIr, ReduceDimOpIr, GatherOpIr, SelectOpIr, MaskFillOpIr, SliceAssignOpIr, MaskWhereOpIr, BinaryOpIr, ScalarOpIr};",
    "use burn_router::{BackendRouter, RunnerClient, get_client};",
    "use burn_std::{BoolDType, FloatDType, IntDType, Shape, Slice};",
    "use core::future::Future;",
    "use core::ops::Range;",
    "",
    "type R<I> = BackendRouter<SwapChannel<I>>;",
    "",
]

# One file per op family, as burn-router's `ops/`.
FILES = {
    "FloatTensorOps": "float",
    "IntTensorOps": "int",
    "BoolTensorOps": "bool",
    "ModuleOps": "module",
    "ActivationOps": "activation",
    "QTensorOps": "qtensor",
    "TransactionOps": "transaction",
}

# Every method holds the gate of `backend/in_flight.rs` from its first line, before any input is
# counted out (`into_ir`), until the engine has run it: a drop on another thread waits for it.
def gated(code):
    head, rest = code.split("\n", 1)
    return f"{head}\n        let _op = in_flight::Op::enter();\n{rest}"

import os
os.makedirs("burn-swap/src/backend/ops", exist_ok=True)
stats = []
built_names = []
for trait, files, router_file in TRAITS:
    text = strip_comments("".join(open(f).read() for f in files))
    body = trait_body(text, trait)
    routed = set(re.findall(r"\bfn\s+(\w+)", strip_comments(open(router_file).read())))
    # burn-router declares these but leaves them `todo!()`: they run natively instead.
    routed -= UNROUTED
    out = [
        f"//! `{trait}` of [`Swap`]. Generated by `scripts/gen_forward.py` from burn-backend",
        f"//! {VERSION}'s traits and burn-router {VERSION}'s impls: do not edit by hand.",
    ] + HEADER
    out.append(f"impl<I: BackendIr> {trait}<Self> for Swap<I> {{")
    n_fwd = n_nat = n_def = n_built = 0
    for name, generics, params, ret, where in methods(body):
        if name in HAND_WRITTEN:
            out.append(gated(HAND[name]))
            n_fwd += 1
        elif name in routed and name in BUILT:
            out.append(gated(built(trait, name, generics, params, ret, where)))
            n_fwd += 1
            n_built += 1
            built_names.append(name)
        elif name in routed:
            code = forward(trait, name, generics, params, ret, where)
            if code:
                out.append(gated(code))
                n_fwd += 1
            else:
                n_def += 1
        else:
            native_ok = trait != "TransactionOps" and (trait != "QTensorOps" or name in Q_NATIVE)
            code = native(trait, name, generics, params, ret, where) if native_ok else None
            if code:
                out.append(gated(code))
                n_nat += 1
            else:
                n_def += 1
    out.append("}")
    out.append("")
    open(f"burn-swap/src/backend/ops/{FILES[trait]}.rs", "w").write("\n".join(out))
    stats.append(f"{trait}: {n_fwd} routed ({n_built} through own builders), {n_nat} native, {n_def} default")
mods = "\n".join(f"mod {FILES[t]};" for t, _, _ in TRAITS)
open("burn-swap/src/backend/ops/mod.rs", "w").write(
    "//! The op traits of [`Swap`](super::Swap), one file per op family. Generated by\n"
    "//! `scripts/gen_forward.py` from Burn's op traits: do not edit by hand.\n"
    "//!\n"
    "//! Methods that burn-router implements go through it (as `OperationIr`, through the swap\n"
    "//! client); methods it leaves to the trait's default composition run natively on the inner\n"
    "//! backend through `NativeOp`, so that every value is the inner backend's own. The common\n"
    "//! ops among the first are built by burn-swap's own builders (`backend/build.rs`), the\n"
    "//! same `OperationIr` without burn-router's per-op costs.\n\n"
    + mods + "\n\n"
    "/// The methods made through burn-swap's own builders: `backend/build.rs` checks each\n"
    "/// against burn-router's build of the same method.\n"
    "#[cfg(test)]\n"
    "pub(super) const BUILT: &[&str] = &[\n"
    + "".join(f'    "{n}",\n' for n in built_names)
    + "];\n"
)
print("\n".join(stats))
