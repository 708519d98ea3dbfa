// 64-bit address arithmetic on uvec2 (GL_EXT_buffer_reference_uvec2), for kernels whose wide
// variant forms each row's address itself so that no index into a tensor reaches 2^31 (SPIR-V
// access-chain indices are signed). Needs no shaderInt64: the 64-bit sums are built from
// uaddCarry and umulExtended. Include after common.glsl (it uses Floats).
#extension GL_EXT_buffer_reference_uvec2 : require

// a + 4 * i bytes: the address of float i of the tensor at a (i may exceed 2^31).
uvec2 a64_elem(uvec2 a, uint i)
{
    uint carry;
    uint lo = uaddCarry(a.x, i << 2, carry);
    return uvec2(lo, a.y + (i >> 30) + carry);
}

// a + 4 * row * stride bytes: the address of row `row` of a tensor of rows of `stride` floats.
uvec2 a64_row(uvec2 a, uint row, uint stride)
{
    uint hi, lo, carry;
    umulExtended(row, stride, hi, lo);
    hi = (hi << 2) | (lo >> 30); // elements to bytes
    lo <<= 2;
    uint sum = uaddCarry(a.x, lo, carry);
    return uvec2(sum, a.y + hi + carry);
}

// a + s, both 64-bit byte counts as uvec2 (low word first): one step along a strided walk.
uvec2 a64_add(uvec2 a, uvec2 s)
{
    uint carry;
    uint lo = uaddCarry(a.x, s.x, carry);
    return uvec2(lo, a.y + s.y + carry);
}

// 4 * n bytes as a uvec2 step for a64_add.
uvec2 a64_step(uint n)
{
    return uvec2(n << 2, n >> 30);
}
