// GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x * sigmoid(2u) = x / (1 + exp(-2u)), which is the same function and stays accurate for large
// |x| (u is clamped to +-40, where the sigmoid is 0 or 1 in float). One definition for
// gelu_fwd.comp and the matmul kernels' GELU epilogue, so that both give the same bits for the
// same input.
const float GELU_K = 0.7978845608028654; // sqrt(2 / pi)
const float GELU_A = 0.044715;

float gelu_tanh(float x)
{
    float u = clamp(GELU_K * (x + GELU_A * x * x * x), -40.0, 40.0);
    return x / (1.0 + exp(-2.0 * u));
}
