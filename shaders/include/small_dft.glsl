// The DFT of one butterfly (radix 2, 3, 4, 8, 16 or an odd prime up to
// MAX_RADIX), on values held in registers, for the shared-memory FFTs.
// x is sized by the fixed bound MAX_RADIX and loops run to the radix, a specialization
// constant at every call: unrolled, every index is a constant and x stays in registers
// (elements.glsl says why), and the other radices' branches are gone before any unrolling.

const uint MAX_RADIX = 31;
const uint MAX_HALF_RADIX = MAX_RADIX / 2;

#include "complex.glsl"

// (cos, sin) of 2 pi m / radix, m = 1 .. (radix - 1) / 2, for the odd primes 5 .. 31 in turn,
// rounded from double. Indexed by constants once the radix is one, they become immediates:
// no registers held and no loads, where the radix-31 butterfly is already short of registers.
const vec2 ODD_PRIME_ROOTS[73] = vec2[](
    vec2(0.3090169944, 0.9510565163), vec2(-0.8090169944, 0.5877852523), vec2(0.6234898019, 0.7818314825),
    vec2(-0.222520934, 0.9749279122), vec2(-0.9009688679, 0.4338837391), vec2(0.8412535328, 0.5406408175),
    vec2(0.415415013, 0.9096319954), vec2(-0.1423148383, 0.9898214419), vec2(-0.6548607339, 0.7557495744),
    vec2(-0.9594929736, 0.2817325568), vec2(0.8854560257, 0.464723172), vec2(0.5680647467, 0.8229838659),
    vec2(0.1205366803, 0.9927088741), vec2(-0.354604887, 0.9350162427), vec2(-0.7485107482, 0.6631226582),
    vec2(-0.9709418174, 0.2393156643), vec2(0.9324722294, 0.3612416662), vec2(0.7390089172, 0.6736956436),
    vec2(0.4457383558, 0.8951632914), vec2(0.09226835946, 0.9957341763), vec2(-0.2736629901, 0.9618256432),
    vec2(-0.6026346364, 0.7980172273), vec2(-0.8502171357, 0.5264321629), vec2(-0.9829730997, 0.1837495178),
    vec2(0.9458172417, 0.3246994692), vec2(0.7891405094, 0.6142127127), vec2(0.5469481581, 0.8371664783),
    vec2(0.2454854871, 0.9694002659), vec2(-0.08257934547, 0.996584493), vec2(-0.4016954247, 0.9157733267),
    vec2(-0.6772815716, 0.7357239107), vec2(-0.8794737512, 0.475947393), vec2(-0.9863613034, 0.1645945903),
    vec2(0.9629172873, 0.2697967712), vec2(0.8544194045, 0.51958395), vec2(0.6825531432, 0.7308359643),
    vec2(0.4600650377, 0.8878852184), vec2(0.2034560131, 0.9790840877), vec2(-0.06824241336, 0.9976687692),
    vec2(-0.3348796122, 0.9422609221), vec2(-0.5766803221, 0.816969893), vec2(-0.7757112907, 0.6310879443),
    vec2(-0.9172113015, 0.3984010898), vec2(-0.990685946, 0.1361666491), vec2(0.9766205557, 0.2149704402),
    vec2(0.9075754197, 0.4198891016), vec2(0.7960930657, 0.6051742152), vec2(0.6473862848, 0.7621620551),
    vec2(0.4684084407, 0.8835120444), vec2(0.2675283385, 0.9635499925), vec2(0.05413890859, 0.9985334139),
    vec2(-0.1617819966, 0.9868265225), vec2(-0.3701381553, 0.9289767198), vec2(-0.5611870654, 0.8276889982),
    vec2(-0.7259954919, 0.6876994589), vec2(-0.8568571762, 0.5155538572), vec2(-0.9476531712, 0.3193015301),
    vec2(-0.9941379572, 0.1081190184), vec2(0.9795299413, 0.2012985201), vec2(0.9189578116, 0.3943558551),
    vec2(0.8207634412, 0.5712682151), vec2(0.6889669191, 0.7247927872), vec2(0.5289640103, 0.8486442575),
    vec2(0.3473052528, 0.9377521321), vec2(0.1514277775, 0.9884683243), vec2(-0.05064916884, 0.9987165072),
    vec2(-0.2506525323, 0.9680771189), vec2(-0.4403941516, 0.8978045396), vec2(-0.6121059825, 0.7907757369),
    vec2(-0.7587581227, 0.6513724827), vec2(-0.8743466161, 0.4853019625), vec2(-0.9541392564, 0.299363123),
    vec2(-0.9948693234, 0.101168322));
uint odd_prime_roots_first(uint radix) { return radix == 5 ? 0u : radix == 7 ? 2u : radix == 11 ? 5u : radix == 13 ? 10u : radix == 17 ? 16u : radix == 19 ? 24u : radix == 23 ? 33u : radix == 29 ? 44u : 58u; }

// (cos, sin) of 2 pi m / 16, m = 0 .. 9: the twiddles inside the radix-8 and -16 butterflies.
const vec2 SIXTEENTH_ROOTS[10] = vec2[](
    vec2(1.0, 0.0), vec2(0.9238795325, 0.3826834324), vec2(0.7071067812, 0.7071067812), vec2(0.3826834324, 0.9238795325),
    vec2(0.0, 1.0), vec2(-0.3826834324, 0.9238795325), vec2(-0.7071067812, 0.7071067812), vec2(-0.9238795325, 0.3826834324),
    vec2(-1.0, 0.0), vec2(-0.9238795325, -0.3826834324));

// The length-4 DFT of (a, b, c, d) in place.
void dft4(inout vec2 a, inout vec2 b, inout vec2 c, inout vec2 d, float s) {
  const vec2 even_sum = a + c, even_difference = a - c, odd_sum = b + d;
  const vec2 odd_turn = s * times_i(b - d);  // e^(s i pi / 2) = s i
  a = even_sum + odd_sum;
  c = even_sum - odd_sum;
  b = even_difference + odd_turn;
  d = even_difference - odd_turn;
}

// x <- X, X_k = sum_j x_j e^(s 2 pi i j k / radix), s = -1 (forward) or +1 (inverse).
void small_dft(inout vec2 x[MAX_RADIX], uint radix, bool inverse) {
  const float s = inverse ? 1.0 : -1.0;
  if (radix == 8 || radix == 16) {
    // radix = 4 C: with j = C j1 + j2 and k = k1 + 4 k2, length-4 DFTs over j1 for each j2,
    // twiddles e^(s 2 pi i j2 k1 / radix), then length-C DFTs over j2 for each k1.
    const uint columns = radix / 4;
    [[unroll]] for (uint j2 = 0; j2 < columns; ++j2) {
      dft4(x[j2], x[columns + j2], x[2 * columns + j2], x[3 * columns + j2], s);
      [[unroll]] for (uint k1 = 1; k1 < 4; ++k1)
        if (j2 > 0) {
          const vec2 root = SIXTEENTH_ROOTS[j2 * k1 * (16 / radix)];
          x[k1 * columns + j2] = complex_mul(x[k1 * columns + j2], vec2(root.x, s * root.y));
        }
    }
    vec2 y[16];
    [[unroll]] for (uint k1 = 0; k1 < 4; ++k1) {
      vec2 a = x[k1 * columns], b = x[k1 * columns + 1], c = vec2(0.0), d = vec2(0.0);
      if (columns == 4) {
        c = x[k1 * columns + 2];
        d = x[k1 * columns + 3];
        dft4(a, b, c, d, s);
      } else {
        const vec2 first = a;
        a = first + b;
        b = first - b;
      }
      y[k1] = a;
      y[k1 + 4] = b;
      y[k1 + 8] = c;
      y[k1 + 12] = d;
    }
    [[unroll]] for (uint k = 0; k < radix; ++k) x[k] = y[k];
  } else if (radix == 2) {
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
    dft4(x[0], x[1], x[2], x[3], s);
  } else {
    // Odd prime: X_k = A_k + s i B_k and X_{radix-k} = A_k - s i B_k with
    // A_k = x_0 + sum_j (x_j + x_{radix-j}) cos(2 pi j k / radix) and
    // B_k = sum_j (x_j - x_{radix-j}) sin(2 pi j k / radix), j = 1 .. (radix - 1) / 2:
    // a quarter of the direct DFT's multiplications.
    const uint half_radix = (radix - 1) / 2;
    const uint roots = odd_prime_roots_first(radix) - 1;
    vec2 sums[MAX_HALF_RADIX + 1], differences[MAX_HALF_RADIX + 1];
    const vec2 first = x[0];
    vec2 total = first;
    [[unroll]] for (uint j = 1; j <= half_radix; ++j) {
      sums[j] = x[j] + x[radix - j];
      differences[j] = x[j] - x[radix - j];
      total += sums[j];
    }
    [[unroll]] for (uint k = 1; k <= half_radix; ++k) {
      vec2 a = first, b = vec2(0.0);
      [[unroll]] for (uint j = 1; j <= half_radix; ++j) {
        const uint m = (j * k) % radix;
        const vec2 root = m <= half_radix ? ODD_PRIME_ROOTS[roots + m]
                                          : vec2(ODD_PRIME_ROOTS[roots + radix - m].x, -ODD_PRIME_ROOTS[roots + radix - m].y);
        a += root.x * sums[j];
        b += root.y * differences[j];
      }
      x[k] = a + s * times_i(b);
      x[radix - k] = a - s * times_i(b);
    }
    x[0] = total;
  }
}
