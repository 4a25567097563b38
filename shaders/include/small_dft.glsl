// Complex helpers and the DFT of one butterfly (radix 2, 3, 4 or an odd prime up to
// MAX_RADIX), on values held in registers, for the shared-memory FFTs. Needs the including
// kernel's `twiddles` buffer: roots are read from its table of e^(-2 pi i m / length).
// x is sized by the fixed bound MAX_RADIX and loops run to the radix, a specialization
// constant at every call: unrolled, every index is a constant and x stays in registers
// (elements.glsl says why), and the other radices' branches are gone before any unrolling.

const uint MAX_RADIX = 31;
const uint MAX_HALF_RADIX = MAX_RADIX / 2;

vec2 complex_mul(vec2 a, vec2 b) { return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
vec2 times_i(vec2 a) { return vec2(-a.y, a.x); }

// x <- X, X_k = sum_j x_j e^(s 2 pi i j k / radix), s = -1 (forward) or +1 (inverse). The
// root e^(-2 pi i m / radix) is twiddles[roots + m * root_step].
void small_dft(inout vec2 x[MAX_RADIX], uint radix, uint roots, uint root_step, bool inverse) {
  const float s = inverse ? 1.0 : -1.0;
  if (radix == 2) {
    const vec2 a = x[0];
    x[0] = a + x[1];
    x[1] = a - x[1];
  } else if (radix == 3) {
    const vec2 sum = x[1] + x[2], middle = x[0] - 0.5 * sum;
    const vec2 turn = (s * 0.86602540378443865) * times_i(x[1] - x[2]);  // sin(2 pi / 3)
    x[0] += sum;
    x[1] = middle + turn;
    x[2] = middle - turn;
  } else if (radix == 4) {
    const vec2 even_sum = x[0] + x[2], even_difference = x[0] - x[2], odd_sum = x[1] + x[3];
    const vec2 odd_turn = s * times_i(x[1] - x[3]);  // e^(s i pi / 2) = s i
    x[0] = even_sum + odd_sum;
    x[2] = even_sum - odd_sum;
    x[1] = even_difference + odd_turn;
    x[3] = even_difference - odd_turn;
  } else {
    // Odd prime: X_k = A_k + s i B_k and X_{radix-k} = A_k - s i B_k with
    // A_k = x_0 + sum_j (x_j + x_{radix-j}) cos(2 pi j k / radix) and
    // B_k = sum_j (x_j - x_{radix-j}) sin(2 pi j k / radix), j = 1 .. (radix - 1) / 2:
    // a quarter of the direct DFT's multiplications.
    const uint half_radix = (radix - 1) / 2;
    vec2 roots_held[MAX_HALF_RADIX + 1], sums[MAX_HALF_RADIX + 1], differences[MAX_HALF_RADIX + 1];
    const vec2 first = x[0];
    vec2 total = first;
    [[unroll]] for (uint j = 1; j <= half_radix; ++j) {
      const vec2 root = twiddles[roots + j * root_step];
      roots_held[j] = vec2(root.x, -root.y);  // (cos, sin) of 2 pi j / radix
      sums[j] = x[j] + x[radix - j];
      differences[j] = x[j] - x[radix - j];
      total += sums[j];
    }
    [[unroll]] for (uint k = 1; k <= half_radix; ++k) {
      vec2 a = first, b = vec2(0.0);
      [[unroll]] for (uint j = 1; j <= half_radix; ++j) {
        const uint m = (j * k) % radix;
        const vec2 root = m <= half_radix ? roots_held[m] : vec2(roots_held[radix - m].x, -roots_held[radix - m].y);
        a += root.x * sums[j];
        b += root.y * differences[j];
      }
      x[k] = a + s * times_i(b);
      x[radix - k] = a - s * times_i(b);
    }
    x[0] = total;
  }
}
