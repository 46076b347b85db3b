//! The module ops (linear layers, convolutions, poolings, embeddings, attention, ...) and
//! their backward ops, of the interpreter.

use burn_ir::{BackendIr, ModuleOperationIr, TensorId};

use super::Handles;

/// Runs a module op: every one makes float tensors (the pools with indices make an int one
/// too, the deformable convolution's backward up to five).
#[inline(never)]
pub(super) fn run<B: BackendIr>(h: &mut Handles<B>, op: &ModuleOperationIr) {
    use ModuleOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::Embedding(d) => {
            let (weights, indices) = (h.float(&d.weights), h.int(&d.indices));
            (d.out.id, B::embedding(weights, indices))
        }
        Op::EmbeddingBackward(d) => {
            let (weights, indices) = (h.float(&d.weights), h.int(&d.indices));
            let grad = h.float(&d.out_grad);
            (d.out.id, B::embedding_backward(weights, grad, indices))
        }
        Op::Linear(d) => {
            let (x, weight) = (h.float(&d.x), h.float(&d.weight));
            let bias = d.bias.as_ref().map(|b| h.float(b));
            (d.out.id, B::linear(x, weight, bias))
        }
        Op::LinearXBackward(d) => {
            let (weight, grad) = (h.float(&d.weight), h.float(&d.output_grad));
            (d.out.id, B::linear_x_backward(weight, grad))
        }
        Op::LinearWeightBackward(d) => {
            let (x, grad) = (h.float(&d.x), h.float(&d.output_grad));
            (d.out.id, B::linear_weight_backward(x, grad))
        }
        Op::LinearBiasBackward(d) => (d.out.id, B::linear_bias_backward(h.float(&d.output_grad))),
        Op::Conv1d(d) => {
            let (x, weight) = (h.float(&d.x), h.float(&d.weight));
            let bias = d.bias.as_ref().map(|b| h.float(b));
            (
                d.out.id,
                B::conv1d(x, weight, bias, d.options.clone().into()),
            )
        }
        Op::Conv1dXBackward(d) => {
            let (x, weight, grad) = (h.float(&d.x), h.float(&d.weight), h.float(&d.output_grad));
            (
                d.out.id,
                B::conv1d_x_backward(x, weight, grad, d.options.clone().into()),
            )
        }
        Op::Conv1dWeightBackward(d) => {
            let (x, weight, grad) = (h.float(&d.x), h.float(&d.weight), h.float(&d.output_grad));
            (
                d.out.id,
                B::conv1d_weight_backward(x, weight, grad, d.options.clone().into()),
            )
        }
        Op::Conv1dBiasBackward(d) => {
            let (x, bias, grad) = (h.float(&d.x), h.float(&d.bias), h.float(&d.output_grad));
            (d.out.id, B::conv1d_bias_backward(x, bias, grad))
        }
        Op::Conv2d(d) => {
            let (x, weight) = (h.float(&d.x), h.float(&d.weight));
            let bias = d.bias.as_ref().map(|b| h.float(b));
            (
                d.out.id,
                B::conv2d(x, weight, bias, d.options.clone().into()),
            )
        }
        Op::Conv2dXBackward(d) => {
            let (x, weight, grad) = (h.float(&d.x), h.float(&d.weight), h.float(&d.output_grad));
            (
                d.out.id,
                B::conv2d_x_backward(x, weight, grad, d.options.clone().into()),
            )
        }
        Op::Conv2dWeightBackward(d) => {
            let (x, weight, grad) = (h.float(&d.x), h.float(&d.weight), h.float(&d.output_grad));
            (
                d.out.id,
                B::conv2d_weight_backward(x, weight, grad, d.options.clone().into()),
            )
        }
        Op::Conv2dBiasBackward(d) => {
            let (x, bias, grad) = (h.float(&d.x), h.float(&d.bias), h.float(&d.output_grad));
            (d.out.id, B::conv2d_bias_backward(x, bias, grad))
        }
        Op::Conv3d(d) => {
            let (x, weight) = (h.float(&d.x), h.float(&d.weight));
            let bias = d.bias.as_ref().map(|b| h.float(b));
            (
                d.out.id,
                B::conv3d(x, weight, bias, d.options.clone().into()),
            )
        }
        Op::Conv3dXBackward(d) => {
            let (x, weight, grad) = (h.float(&d.x), h.float(&d.weight), h.float(&d.output_grad));
            (
                d.out.id,
                B::conv3d_x_backward(x, weight, grad, d.options.clone().into()),
            )
        }
        Op::Conv3dWeightBackward(d) => {
            let (x, weight, grad) = (h.float(&d.x), h.float(&d.weight), h.float(&d.output_grad));
            (
                d.out.id,
                B::conv3d_weight_backward(x, weight, grad, d.options.clone().into()),
            )
        }
        Op::Conv3dBiasBackward(d) => {
            let (x, bias, grad) = (h.float(&d.x), h.float(&d.bias), h.float(&d.output_grad));
            (d.out.id, B::conv3d_bias_backward(x, bias, grad))
        }
        Op::DeformableConv2d(d) => {
            let (x, offset) = (h.float(&d.x), h.float(&d.offset));
            let mask = d.mask.as_ref().map(|m| h.float(m));
            let weight = h.float(&d.weight);
            let bias = d.bias.as_ref().map(|b| h.float(b));
            let options = d.options.clone().into();
            (
                d.out.id,
                B::deform_conv2d(x, offset, weight, mask, bias, options),
            )
        }
        Op::DeformableConv2dBackward(d) => {
            let (x, offset) = (h.float(&d.x), h.float(&d.offset));
            let mask = d.mask.as_ref().map(|m| h.float(m));
            let weight = h.float(&d.weight);
            let bias = d.bias.as_ref().map(|b| h.float(b));
            let grad = h.float(&d.out_grad);
            let options = d.options.clone().into();
            let grads = B::deform_conv2d_backward(x, offset, weight, mask, bias, grad, options);
            h.put_float(d.offset_grad.id, grads.offset_grad);
            h.put_float(d.weight_grad.id, grads.weight_grad);
            if let (Some(grad), Some(out)) = (grads.mask_grad, d.mask_grad.as_ref()) {
                h.put_float(out.id, grad);
            }
            if let (Some(grad), Some(out)) = (grads.bias_grad, d.bias_grad.as_ref()) {
                h.put_float(out.id, grad);
            }
            (d.input_grad.id, grads.x_grad)
        }
        Op::ConvTranspose1d(d) => {
            let (x, weight) = (h.float(&d.x), h.float(&d.weight));
            let bias = d.bias.as_ref().map(|b| h.float(b));
            (
                d.out.id,
                B::conv_transpose1d(x, weight, bias, d.options.clone().into()),
            )
        }
        Op::ConvTranspose2d(d) => {
            let (x, weight) = (h.float(&d.x), h.float(&d.weight));
            let bias = d.bias.as_ref().map(|b| h.float(b));
            (
                d.out.id,
                B::conv_transpose2d(x, weight, bias, d.options.clone().into()),
            )
        }
        Op::ConvTranspose3d(d) => {
            let (x, weight) = (h.float(&d.x), h.float(&d.weight));
            let bias = d.bias.as_ref().map(|b| h.float(b));
            (
                d.out.id,
                B::conv_transpose3d(x, weight, bias, d.options.clone().into()),
            )
        }
        Op::AvgPool1d(d) => {
            let x = h.float(&d.x);
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let out = B::avg_pool1d(x, k, s, p, d.count_include_pad, d.ceil_mode);
            (d.out.id, out)
        }
        Op::AvgPool2d(d) => {
            let x = h.float(&d.x);
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let out = B::avg_pool2d(x, k, s, p, d.count_include_pad, d.ceil_mode);
            (d.out.id, out)
        }
        Op::AvgPool1dBackward(d) => {
            let (x, grad) = (h.float(&d.x), h.float(&d.grad));
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let out = B::avg_pool1d_backward(x, grad, k, s, p, d.count_include_pad, d.ceil_mode);
            (d.out.id, out)
        }
        Op::AvgPool2dBackward(d) => {
            let (x, grad) = (h.float(&d.x), h.float(&d.grad));
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let out = B::avg_pool2d_backward(x, grad, k, s, p, d.count_include_pad, d.ceil_mode);
            (d.out.id, out)
        }
        Op::AdaptiveAvgPool1d(d) => (
            d.out.id,
            B::adaptive_avg_pool1d(h.float(&d.x), d.output_size),
        ),
        Op::AdaptiveAvgPool2d(d) => (
            d.out.id,
            B::adaptive_avg_pool2d(h.float(&d.x), d.output_size),
        ),
        Op::AdaptiveAvgPool1dBackward(d) => {
            let (x, grad) = (h.float(&d.x), h.float(&d.grad));
            (d.out.id, B::adaptive_avg_pool1d_backward(x, grad))
        }
        Op::AdaptiveAvgPool2dBackward(d) => {
            let (x, grad) = (h.float(&d.x), h.float(&d.grad));
            (d.out.id, B::adaptive_avg_pool2d_backward(x, grad))
        }
        Op::MaxPool1d(d) => {
            let x = h.float(&d.x);
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            (d.out.id, B::max_pool1d(x, k, s, p, d.dilation, d.ceil_mode))
        }
        Op::MaxPool1dWithIndices(d) => {
            let x = h.float(&d.x);
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let pooled = B::max_pool1d_with_indices(x, k, s, p, d.dilation, d.ceil_mode);
            h.put_int(d.out_indices.id, pooled.indices);
            (d.out.id, pooled.output)
        }
        Op::MaxPool1dWithIndicesBackward(d) => {
            let (x, grad, indices) = (h.float(&d.x), h.float(&d.grad), h.int(&d.indices));
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let back = B::max_pool1d_with_indices_backward(
                x,
                k,
                s,
                p,
                d.dilation,
                d.ceil_mode,
                grad,
                indices,
            );
            (d.out.id, back.x_grad)
        }
        Op::MaxPool2d(d) => {
            let x = h.float(&d.x);
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            (d.out.id, B::max_pool2d(x, k, s, p, d.dilation, d.ceil_mode))
        }
        Op::MaxPool2dWithIndices(d) => {
            let x = h.float(&d.x);
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let pooled = B::max_pool2d_with_indices(x, k, s, p, d.dilation, d.ceil_mode);
            h.put_int(d.out_indices.id, pooled.indices);
            (d.out.id, pooled.output)
        }
        Op::MaxPool2dWithIndicesBackward(d) => {
            let (x, grad, indices) = (h.float(&d.x), h.float(&d.grad), h.int(&d.indices));
            let (k, s, p) = (d.kernel_size, d.stride, d.padding);
            let back = B::max_pool2d_with_indices_backward(
                x,
                k,
                s,
                p,
                d.dilation,
                d.ceil_mode,
                grad,
                indices,
            );
            (d.out.id, back.x_grad)
        }
        Op::Interpolate(d) => {
            let x = h.float(&d.x);
            (
                d.out.id,
                B::interpolate(x, d.output_size, d.options.clone().into()),
            )
        }
        Op::InterpolateBackward(d) => {
            let (x, grad) = (h.float(&d.x), h.float(&d.grad));
            let out = B::interpolate_backward(x, grad, d.output_size, d.options.clone().into());
            (d.out.id, out)
        }
        Op::Rfft(d) => {
            let (re, im) = B::rfft(h.float(&d.signal), d.dim, d.n);
            h.put_float(d.out_im.id, im);
            (d.out_re.id, re)
        }
        Op::IRfft(d) => {
            let (re, im) = (h.float(&d.input_re), h.float(&d.input_im));
            (d.out_signal.id, B::irfft(re, im, d.dim, d.n))
        }
        Op::Attention(d) => {
            let (query, key) = (h.float(&d.query), h.float(&d.key));
            let value = h.float(&d.value);
            let mask = d.mask.as_ref().map(|m| h.bool(m));
            let bias = d.attn_bias.as_ref().map(|b| h.float(b));
            let out = B::attention(query, key, value, mask, bias, d.options.clone().into());
            (d.out.id, out)
        }
        Op::CtcLoss(d) => {
            let (log_probs, targets) = (h.float(&d.log_probs), h.int(&d.targets));
            let (inputs, target_lengths) = (h.int(&d.input_lengths), h.int(&d.target_lengths));
            let out = B::ctc_loss(log_probs, targets, inputs, target_lengths, d.blank);
            (d.out.id, out)
        }
        Op::CtcLossBackward(d) => {
            let (log_probs, targets) = (h.float(&d.log_probs), h.int(&d.targets));
            let (inputs, target_lengths) = (h.int(&d.input_lengths), h.int(&d.target_lengths));
            let grad = h.float(&d.grad_loss);
            let out =
                B::ctc_loss_backward(log_probs, targets, inputs, target_lengths, grad, d.blank);
            (d.out.id, out)
        }
    };
    h.put_float(out, tensor);
}
