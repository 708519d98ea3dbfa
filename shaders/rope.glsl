// Rotary position embedding (Hugging Face transformers' Llama, rotate_half), in place on the q
// and k heads of x (rows, W) with W = (NH + 2 NKV) D: per row [q (NH heads) | k (NKV) | v (NKV)],
// so the q and k heads are the first `heads` = NH + NKV blocks of D of each row; v is untouched.
// Row r is position t = (row0 + r) % T. For head dimension D, pairs (i, i + D/2), i < D/2, with
// angle a = t * inv_freq[i]:
//   x'[i] = x[i] cos(SIGN a) - x[i + D/2] sin(SIGN a)
//   x'[i + D/2] = x[i + D/2] cos(SIGN a) + x[i] sin(SIGN a)
// SIGN = +1 (rope_fwd.comp) rotates; SIGN = -1 (rope_bwd.comp) rotates a gradient back (the
// transpose of the rotation), with the same cos and the negated sin: the same bits up to sign.
// The angle: t * inv_freq[i] is formed exactly as a sum of four products of 12-bit halves
// (t < 2^24 split by bits, inv_freq by mantissa bits), added into hi + lo without loss (TwoSum),
// then reduced by 2 pi written as four pieces (Cody-Waite; the first three of 9 bits, so k times
// them is exact for k < 2^15), with `precise` arithmetic (no contraction: Vulkan's add and multiply
// are correctly rounded, its fma need not be). cos and sin are then the device's, of an argument
// in [-pi, pi] that is accurate to about 1e-6 rad whenever t * inv_freq < 2^15 * 2 pi (about
// 205000: t < 131072 with inv_freq <= 1); beyond that the error grows as t * inv_freq * 2^-24. A
// plain fp32 product and a GPU's sin of a large argument would lose about t * 2^-24 rad, plus the
// sin's own error out of range (Vulkan only bounds sin and cos inside [-pi, pi]).
// One invocation per pair (grid-stride); QKV_BF16 = 1 (forward only, mixed precision): x is
// bf16 and an invocation rotates two adjacent pairs (i, i + 1 and i + D/2, i + D/2 + 1, D a
// multiple of 4), reading and writing whole words, rounded once to nearest even.
layout(constant_id = 3) const uint QKV_BF16 = 0;

layout(push_constant) uniform Push {
    Floats x;        // (rows, W), in place
    Floats inv_freq; // (D / 2)
    uint rows, T, row0, W, heads, D;
} p;

const float TWO_PI_INV = 0.15915494309189535;
const float C1 = 6.28125;                  // 2 pi in four pieces (C1..C3 of 9 bits each)
const float C2 = 0.001934051513671875;
const float C3 = 1.255422830581665e-06;
const float C4 = 2.430840251310684e-10;

// s + e = a + b exactly (TwoSum; precise: no reassociation or contraction).
void two_sum(float a, float b, out float s, out float e)
{
    precise float ps = a + b;
    precise float bb = ps - a;
    precise float pe = (a - (ps - bb)) + (b - bb);
    s = ps;
    e = pe;
}

// cos and sin of SIGN * t * f.
vec2 rope_cs(uint t, float f)
{
    float th = float(t & 0xFFF000u), tl = float(t & 0xFFFu);
    float fh = uintBitsToFloat(floatBitsToUint(f) & 0xFFFFF000u);
    precise float fl = f - fh;
    precise float p0 = th * fh, p1 = tl * fh, p2 = th * fl, p3 = tl * fl; // exact
    float hi, lo, e1, e2;
    two_sum(p0, p1, hi, lo);
    two_sum(hi, p2, hi, e1);
    two_sum(hi, p3, hi, e2);
    precise float l = lo + e1 + e2;
    float k = round(hi * TWO_PI_INV);
    precise float r = hi - k * C1;
    r = r - k * C2;
    r = r - k * C3;
    r = r - k * C4;
    r = r + l;
    return vec2(cos(r), SIGN * sin(r));
}

void main()
{
    uint half_ = p.D / 2, per = QKV_BF16 == 1 ? p.D / 4 : half_;
    uint n = p.rows * p.heads * per;
    for (uint j = gl_GlobalInvocationID.x; j < n; j += grid_stride_x()) {
        uint q = j / per, i = (j - q * per) * (QKV_BF16 == 1 ? 2 : 1);
        uint row = q / p.heads, head = q - row * p.heads;
        uint t = (p.row0 + row) % p.T, at = row * p.W + head * p.D + i;
        if (QKV_BF16 == 1) {
            Uints w = Uints(uvec2(p.x));
            vec2 c0 = rope_cs(t, p.inv_freq.v[i]), c1 = rope_cs(t, p.inv_freq.v[i + 1]);
            float a0 = bf16_load(w, at), a1 = bf16_load(w, at + 1);
            float b0 = bf16_load(w, at + half_), b1 = bf16_load(w, at + half_ + 1);
            w.v[at / 2] = bf16_pack2(a0 * c0.x - b0 * c0.y, a1 * c1.x - b1 * c1.y);
            w.v[(at + half_) / 2] = bf16_pack2(b0 * c0.x + a0 * c0.y, b1 * c1.x + a1 * c1.y);
        } else {
            vec2 cs = rope_cs(t, p.inv_freq.v[i]);
            float a = p.x.v[at], b = p.x.v[at + half_];
            p.x.v[at] = a * cs.x - b * cs.y;
            p.x.v[at + half_] = b * cs.x + a * cs.y;
        }
    }
}
