// Shared by every vkgpt shader: tensors are buffer references (device addresses) passed in push
// constants; the workgroup size is specialization constants 0, 1, 2.
#extension GL_EXT_buffer_reference : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4s { vec4 v[]; };

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

// Total number of invocations along x, for grid-stride loops over large tensors.
uint grid_stride_x()
{
    return gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}

// bf16 storage (mixed precision): a bf16 tensor is an array of 16-bit values packed two to a
// 32-bit word, element 2j in the low half (the layout of 16-bit storage on little-endian
// devices), read and written through plain 32-bit words so that no 16-bit storage feature is
// needed. Arithmetic stays in fp32: load, widen, compute, round on store.
// A float tensor's address is viewed as one through Uints(uvec2(t)).
#extension GL_EXT_buffer_reference_uvec2 : require
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Uints { uint v[]; };

// The bf16 bits of x rounded to nearest, ties to even; a NaN stays a (quiet) NaN.
uint bf16_round(float x)
{
    uint u = floatBitsToUint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// The float of bf16 bits h (exact).
float bf16_widen(uint h)
{
    return uintBitsToFloat(h << 16);
}

// Element i of the bf16 tensor t.
float bf16_load(Uints t, uint i)
{
    uint w = t.v[i >> 1];
    return uintBitsToFloat((i & 1u) != 0 ? w & 0xFFFF0000u : w << 16);
}

// Two floats rounded to bf16 and packed into one word (lo: the even element).
uint bf16_pack2(float lo, float hi)
{
    return bf16_round(lo) | (bf16_round(hi) << 16);
}

// Element i of the bf16 tensor t set to the bf16 bits h, the other half of its word left as it
// is: for stores whose two elements of a word are made by different invocations (the matmul
// kernels' epilogues). Each atomic changes only its own half, so the word ends the same in any
// order.
void bf16_store_bits(Uints t, uint i, uint h)
{
    uint sh = (i & 1u) * 16u;
    atomicAnd(t.v[i >> 1], ~(0xFFFFu << sh));
    atomicOr(t.v[i >> 1], h << sh);
}

// Element i of the bf16 tensor t set to x rounded (bf16_store_bits).
void bf16_store_half(Uints t, uint i, float x)
{
    bf16_store_bits(t, i, bf16_round(x));
}
