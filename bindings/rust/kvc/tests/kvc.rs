//! The safe crate against references: FULL attention against a float64 attention written here,
//! every policy on Vulkan (lavapipe in CI) against the CPU backend, the errors, and the device
//! path with one-submission steps against the host calls. Random inputs; the seed is printed
//! and KVC_TEST_SEED repeats it. Without a Vulkan device the Vulkan halves are skipped with a
//! message, unless KVC_REQUIRE_GPU=1 (CI) makes that a failure.
use kvc::{Backend, BufferView, Cache, CacheDesc, Context, ContextOptions, DType, EvictionParams, FaedKvParams, FourierParams, FreqKvParams, LayerContents, Policy,
          Rope, Status, WindowParams};

/// The demo's generator (samples/demo.c), seeded from KVC_TEST_SEED or the clock.
struct Random(u64);

impl Random {
    fn seeded(test: &str) -> Random {
        let seed = std::env::var("KVC_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % (1 << 31)
        });
        println!("{test}: seed {seed} (KVC_TEST_SEED={seed} repeats it)");
        Random(seed)
    }

    fn unit(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) & 0xffffff) as f32 / 16777216.0 * 2.0 - 1.0
    }

    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.unit()).collect()
    }
}

fn vulkan() -> Option<Context> {
    match Context::new(Backend::Vulkan) {
        Ok(ctx) => Some(ctx),
        Err(e) if std::env::var("KVC_REQUIRE_GPU").as_deref() == Ok("1") => panic!("KVC_REQUIRE_GPU=1 but {e}"),
        Err(e) => {
            println!("skipped on Vulkan: {e}");
            None
        }
    }
}

fn contexts() -> Vec<Context> {
    let mut contexts = vec![Context::new(Backend::Cpu).unwrap()];
    contexts.extend(vulkan());
    contexts
}

/// Causal grouped-query attention in f64: q [n][H][d] are the newest n of the slots k, v
/// [S][KV][d]; query i sees slots 0..=slots_before + i.
fn reference_attention(q: &[f32], k: &[f32], v: &[f32], q_heads: usize, kv_heads: usize, head_dim: usize,
                       slots_before: usize) -> Vec<f64> {
    let n = q.len() / (q_heads * head_dim);
    let mut out = vec![0.0; q.len()];
    for i in 0..n {
        let visible = slots_before + i + 1;
        for h in 0..q_heads {
            let kv = h / (q_heads / kv_heads);
            let query = &q[(i * q_heads + h) * head_dim..][..head_dim];
            let logits: Vec<f64> = (0..visible)
                .map(|s| {
                    let key = &k[(s * kv_heads + kv) * head_dim..][..head_dim];
                    query.iter().zip(key).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() / (head_dim as f64).sqrt()
                })
                .collect();
            let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for (s, w) in weights.iter().enumerate() {
                for d in 0..head_dim {
                    out[(i * q_heads + h) * head_dim + d] += w / total * v[(s * kv_heads + kv) * head_dim + d] as f64;
                }
            }
        }
    }
    out
}

fn max_error(actual: &[f32], expected: &[f64]) -> (f64, f64) {
    let error = actual.iter().zip(expected).map(|(a, e)| (*a as f64 - e).abs()).fold(0.0, f64::max);
    (error, expected.iter().map(|e| e.abs()).fold(0.0, f64::max))
}

#[test]
fn full_attention_matches_reference() {
    let mut random = Random::seeded("full_attention_matches_reference");
    for ctx in contexts() {
        for &(q_heads, kv_heads, head_dim) in &[(4usize, 4usize, 16usize), (8, 2, 64), (6, 1, 128)] {
            let desc = CacheDesc { layers: 1, q_heads: q_heads as u32, kv_heads: kv_heads as u32,
                                   head_dim: head_dim as u32, capacity: 64, ..Default::default() };
            let mut cache = ctx.cache(&desc).unwrap();
            let (mut keys, mut values) = (Vec::new(), Vec::new());
            for n in [9usize, 1, 1, 17] {
                let k = random.vec(n * kv_heads * head_dim);
                let v = random.vec(n * kv_heads * head_dim);
                let q = random.vec(n * q_heads * head_dim);
                cache.append(0, &k, &v).unwrap();
                let slots_before = keys.len() / (kv_heads * head_dim);
                keys.extend_from_slice(&k);
                values.extend_from_slice(&v);
                let mut out = vec![f32::NAN; q.len()];
                cache.attend(0, &q, &mut out).unwrap();
                let expected = reference_attention(&q, &keys, &values, q_heads, kv_heads, head_dim, slots_before);
                let (error, scale) = max_error(&out, &expected);
                // f32 against f64: accumulation order only, ~1e-6 of the output scale.
                assert!(error <= 1e-4 * scale, "{:?} {q_heads}/{kv_heads}/{head_dim}: error {error} of {scale}",
                        ctx.info().unwrap().backend);
            }
            let layer = cache.read::<f32>(0).unwrap();
            assert_eq!(layer.slots, 28);
            assert_eq!(layer.positions[..28].to_vec(), (0..28).collect::<Vec<i32>>());
        }
    }
}

const LAYERS: u32 = 2;
const Q_HEADS: u32 = 4;
const KV_HEADS: u32 = 2;
const HEAD_DIM: u32 = 32;
const PROMPT_CHUNKS: [u32; 3] = [32, 32, 32];
const DECODE_STEPS: u32 = 40;

/// Every policy with a setup that compresses: (policy, capacity, whether the prompt ends with
/// end_prefill, slots each layer holds at the end or None for "at most capacity").
fn policies() -> Vec<(Policy, u32, bool, Option<u32>)> {
    let eviction = EvictionParams { chunk_slots: 32, ..Default::default() };
    let window = WindowParams { budget: 48, window: 16, ..Default::default() };
    let total = 96 + DECODE_STEPS;
    vec![
        (Policy::Full, total, false, Some(total)),
        (Policy::Streaming(eviction.clone()), 64, false, Some(64)),
        (Policy::H2O(eviction.clone()), 64, false, Some(64)),
        (Policy::Tova(eviction.clone()), 64, false, Some(64)),
        (Policy::TreeKv(eviction), 64, false, Some(64)),
        (Policy::SnapKv(window.clone()), total, true, Some(48 + DECODE_STEPS)),
        (Policy::PyramidKv(window.clone()), total, true, None),
        (Policy::HitKv(window.clone()), total, true, Some(48 + DECODE_STEPS)),
        (Policy::PhitKv(window), total, true, None),
        (Policy::FreqKv(FreqKvParams::default()), 128, false, None),
        // Attention sees FAEDKV's 4 sinks, its 76-token middle rebuilt from 2 of 8 DFT chunks and
        // its 16 newest tokens: 96 slots, of which it stores 21 (and the token that left the
        // window last, until the next attention folds it into the bins).
        (Policy::FaedKv(FaedKvParams { sinks: 4, recent_window: 16, chunks: 8, retain_ratio: 0.25, ..Default::default() }),
         96, true, Some(96)),
        // FOURIER compresses each layer at end_prefill (96 > 2 + 2*4 + 8 tokens): attention sees
        // the 2 sinks, the middle (its chosen dims as 8 coefficients, grown by each decode token)
        // and the 8 newest tokens, all 136; it stores the sinks and the window.
        (Policy::Fourier(FourierParams { sinks: 2, local_window: 8, num_states: 4, window_length: total,
                                         ..Default::default() }),
         total, true, Some(total)),
    ]
}

struct Run {
    outputs: Vec<Vec<f32>>,
    slots: Vec<u32>,
    stats: kvc::CacheStats,
}

fn stream(ctx: &Context, policy: &Policy, capacity: u32, ends_prefill: bool, seed: u64) -> Run {
    let mut random = Random(seed);
    let desc = CacheDesc { layers: LAYERS, q_heads: Q_HEADS, kv_heads: KV_HEADS, head_dim: HEAD_DIM, capacity,
                           policy: policy.clone(),
                           // FAEDKV and FOURIER take keys already rotated: they refuse libkvc's RoPE.
                           rope: if matches!(policy, Policy::FaedKv(_) | Policy::Fourier(_)) { Rope::None }
                                 else { Rope::Neox },
                           ..Default::default() };
    let mut cache = ctx.cache(&desc).unwrap();
    let mut outputs = Vec::new();
    let chunks = PROMPT_CHUNKS.iter().cloned().chain(std::iter::repeat(1).take(DECODE_STEPS as usize));
    for (step, n) in chunks.enumerate() {
        if step == PROMPT_CHUNKS.len() && ends_prefill {
            cache.end_prefill().unwrap();
        }
        for layer in 0..LAYERS {
            let k = random.vec((n * KV_HEADS * HEAD_DIM) as usize);
            let v = random.vec(k.len());
            let q = random.vec((n * Q_HEADS * HEAD_DIM) as usize);
            cache.append(layer, &k, &v).unwrap();
            let mut out = vec![0.0; q.len()];
            cache.attend(layer, &q, &mut out).unwrap();
            outputs.push(out);
        }
    }
    Run { outputs, slots: (0..LAYERS).map(|l| cache.layer_slots(l).unwrap()).collect(), stats: cache.stats().unwrap() }
}

#[test]
fn every_policy_holds_its_budget_and_vulkan_matches_cpu() {
    let seed = Random::seeded("every_policy_holds_its_budget_and_vulkan_matches_cpu").0;
    let cpu = Context::new(Backend::Cpu).unwrap();
    let device = vulkan();
    for (policy, capacity, ends_prefill, held) in policies() {
        let expected = stream(&cpu, &policy, capacity, ends_prefill, seed);
        assert_eq!(expected.stats.tokens_seen, (LAYERS * (96 + DECODE_STEPS)) as u64);
        match held {
            Some(held) => assert_eq!(expected.slots, vec![held; LAYERS as usize], "{policy:?}"),
            None => assert!(expected.slots.iter().all(|s| *s <= capacity), "{policy:?}: {:?}", expected.slots),
        }
        if policy != Policy::Full {
            assert!(expected.stats.slots_held < expected.stats.tokens_seen && expected.stats.compressions > 0);
        }
        if let Some(device) = &device {
            let actual = stream(device, &policy, capacity, ends_prefill, seed);
            assert_eq!(actual.slots, expected.slots, "{policy:?}");
            // device_bytes_held is the backend's own memory (FAEDKV's Vulkan path holds FFT
            // buffers the CPU reference does not); every counter must agree.
            let counters = |s: kvc::CacheStats| kvc::CacheStats { device_bytes_held: 0, ..s };
            assert_eq!(counters(actual.stats), counters(expected.stats), "{policy:?}");
            for (a, e) in actual.outputs.iter().zip(&expected.outputs) {
                let e: Vec<f64> = e.iter().map(|x| *x as f64).collect();
                let (error, scale) = max_error(a, &e);
                // The demo's bound: lavapipe and the CPU reference agree within 1e-4 of the scale.
                assert!(error <= 1e-4 * scale, "{policy:?}: error {error} of {scale}");
            }
        }
    }
}

fn small_cache(ctx: &Context) -> Cache<'_> {
    ctx.cache(&CacheDesc { layers: 2, q_heads: 4, kv_heads: 2, head_dim: 16, capacity: 8, ..Default::default() })
        .unwrap()
}

#[test]
fn errors_carry_status_and_message_and_change_nothing() {
    let mut random = Random::seeded("errors_carry_status_and_message_and_change_nothing");
    for ctx in contexts() {
        let mut cache = small_cache(&ctx);
        let k = random.vec(3 * 2 * 16);
        cache.append(0, &k, &k).unwrap();
        let before = (cache.stats().unwrap(), cache.read::<f32>(0).unwrap());
        let one = vec![1.0f32; 32];
        let mut nan = one.clone();
        nan[5] = f32::NAN;
        let cases: Vec<(Status, kvc::Result<()>)> = vec![
            (Status::OutOfRange, cache.append(2, &one, &one)),
            (Status::Capacity, cache.append(0, &vec![1.0; 6 * 32], &vec![1.0; 6 * 32])),
            (Status::NotFinite, cache.append(0, &nan, &one)),
            (Status::DtypeMismatch, cache.append(0, &vec![0u16; 32], &vec![0u16; 32])),
            (Status::InvalidArgument, cache.append(0, &one[..31], &one[..31])),
            (Status::BadState, cache.attend(0, &vec![1.0; 4 * 4 * 16], &mut vec![0.0; 4 * 4 * 16])),
            (Status::BadState, cache.attend(1, &vec![1.0; 4 * 16], &mut vec![0.0; 4 * 16])),
        ];
        for (status, result) in cases {
            let error = result.expect_err("the call must fail");
            assert_eq!(error.status, status, "{error}");
            assert!(!error.message.is_empty());
            assert!(error.to_string().starts_with(status.name()));
        }
        assert_eq!((cache.stats().unwrap(), cache.read::<f32>(0).unwrap()), before);
        let error = ctx.cache(&CacheDesc { layers: 1, q_heads: 4, kv_heads: 2, head_dim: 12, capacity: 8,
                                           ..Default::default() }).unwrap_err();
        assert_eq!(error.status, Status::InvalidArgument);
        assert!(error.message.contains("head_dim"), "{error}");
    }
}

#[test]
fn device_steps_match_host_calls() {
    let mut random = Random::seeded("device_steps_match_host_calls");
    for ctx in contexts() {
        let align = ctx.info().unwrap().buffer_offset_alignment as u64;
        let (n, layers) = (8u32, 2u32);
        let kv_len = (n * 2 * 16) as usize;
        let q_len = (n * 4 * 16) as usize;
        let stride = |values: usize| ((values * 4) as u64).div_ceil(align) * align;
        let (kv_stride, q_stride) = (stride(kv_len), stride(q_len));
        let (k_buf, v_buf) = (ctx.buffer(layers as u64 * kv_stride).unwrap(), ctx.buffer(layers as u64 * kv_stride).unwrap());
        let (q_buf, out_buf) = (ctx.buffer(layers as u64 * q_stride).unwrap(), ctx.buffer(layers as u64 * q_stride).unwrap());
        assert_eq!(k_buf.size().unwrap(), layers as u64 * kv_stride);
        let mut device_cache = small_cache(&ctx);
        let mut host_cache = small_cache(&ctx);
        let inputs: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)> =
            (0..layers).map(|_| (random.vec(kv_len), random.vec(kv_len), random.vec(q_len))).collect();
        let mut step = ctx.step().unwrap();
        for layer in 0..layers {
            let (k, v, q) = &inputs[layer as usize];
            let (kv_at, q_at) = (layer as u64 * kv_stride, layer as u64 * q_stride);
            k_buf.write(kv_at, k).unwrap();
            v_buf.write(kv_at, v).unwrap();
            q_buf.write(q_at, q).unwrap();
            device_cache.append_device(layer, n, k_buf.view(kv_at), v_buf.view(kv_at)).unwrap();
            device_cache.attend_device(layer, n, q_buf.view(q_at), out_buf.view(q_at), None).unwrap();
        }
        // Host outputs inside a step are refused: libkvc would write them after the call.
        let error = host_cache.attend(0, &inputs[0].2, &mut vec![0.0; q_len]).unwrap_err();
        assert_eq!(error.status, Status::BadState);
        step.end().unwrap();
        while !step.wait(0).unwrap() {}
        drop(step);
        for layer in 0..layers {
            let (k, v, q) = &inputs[layer as usize];
            let mut out = vec![f32::NAN; q_len];
            out_buf.read(layer as u64 * q_stride, &mut out).unwrap();
            let mut expected = vec![0.0; q_len];
            host_cache.append(layer, k, v).unwrap();
            host_cache.attend(layer, q, &mut expected).unwrap();
            // Same backend, same kernels: the paths differ only in where the data lives.
            assert!(out.iter().zip(&expected).all(|(a, e)| (a - e).abs() <= 1e-6), "layer {layer}");
        }
        assert_eq!(device_cache.stats().unwrap(), host_cache.stats().unwrap());
    }
}

#[test]
fn decode_device_matches_append_then_attend() {
    let mut random = Random::seeded("decode_device_matches_append_then_attend");
    for ctx in contexts() {
        let align = ctx.info().unwrap().buffer_offset_alignment as u64;
        let (kv_len, q_len) = (2 * 16, 4 * 16);
        let stride = ((q_len * 4) as u64).div_ceil(align) * align;
        let buf = ctx.buffer(5 * stride).unwrap(); // k, v, q, the decoded output, the twin's
        let (k, v, q) = (buf.view(0), buf.view(stride), buf.view(2 * stride));
        let (mut decoded, mut twin) = (small_cache(&ctx), small_cache(&ctx));
        for layer in 0..2 {
            let (pk, pv) = (random.vec(3 * kv_len), random.vec(3 * kv_len));
            decoded.append(layer, &pk, &pv).unwrap();
            twin.append(layer, &pk, &pv).unwrap();
        }
        for token in 0..2 {
            for layer in 0..2 {
                buf.write(0, &random.vec(kv_len)).unwrap();
                buf.write(stride, &random.vec(kv_len)).unwrap();
                buf.write(2 * stride, &random.vec(q_len)).unwrap();
                decoded.decode_device(layer, k, v, q, buf.view(3 * stride)).unwrap();
                twin.append_device(layer, 1, k, v).unwrap();
                twin.attend_device(layer, 1, q, buf.view(4 * stride), None).unwrap();
                let (mut got, mut want) = (vec![f32::NAN; q_len], vec![f32::NAN; q_len]);
                buf.read(3 * stride, &mut got).unwrap();
                buf.read(4 * stride, &mut want).unwrap();
                // On Vulkan the token is a split of its own: f32 sums in another order.
                assert!(got.iter().zip(&want).all(|(a, e)| (a - e).abs() <= 1e-5), "token {token} layer {layer}");
            }
        }
        assert_eq!(decoded.stats().unwrap(), twin.stats().unwrap());
        assert_eq!(decoded.read::<f32>(1).unwrap(), twin.read::<f32>(1).unwrap());
    }
}

#[test]
fn batch_decode_matches_each_cache_alone() {
    let mut random = Random::seeded("batch_decode_matches_each_cache_alone");
    for ctx in contexts() {
        let align = ctx.info().unwrap().buffer_offset_alignment as u64;
        let (kv_len, q_len) = (2 * 16, 4 * 16);
        let q_stride = ((q_len * 4) as u64).div_ceil(align) * align;
        let mut batch: Vec<Cache<'_>> = (0..3).map(|_| small_cache(&ctx)).collect();
        let mut twins: Vec<Cache<'_>> = (0..3).map(|_| small_cache(&ctx)).collect();
        let (q_buf, out_buf, twin_buf) = (ctx.buffer(3 * q_stride).unwrap(), ctx.buffer(3 * q_stride).unwrap(),
                                          ctx.buffer(3 * q_stride).unwrap());
        for (i, (cache, twin)) in batch.iter_mut().zip(twins.iter_mut()).enumerate() {
            let tokens = 1 + 3 * i; // caches of different lengths
            let (k, v) = (random.vec(tokens * kv_len), random.vec(tokens * kv_len));
            cache.append(0, &k, &v).unwrap();
            twin.append(0, &k, &v).unwrap();
            q_buf.write(i as u64 * q_stride, &random.vec(q_len)).unwrap();
        }
        let q: Vec<BufferView<'_>> = (0..3).map(|i| q_buf.view(i * q_stride)).collect();
        let out: Vec<BufferView<'_>> = (0..3).map(|i| out_buf.view(i * q_stride)).collect();
        let mut handles: Vec<&mut Cache<'_>> = batch.iter_mut().collect();
        ctx.attend_batch_device(&mut handles, 0, &q, &out, None).unwrap();
        for (i, twin) in twins.iter_mut().enumerate() {
            twin.attend_device(0, 1, q[i], twin_buf.view(i as u64 * q_stride), None).unwrap();
            let (mut got, mut want) = (vec![f32::NAN; q_len], vec![f32::NAN; q_len]);
            out_buf.read(i as u64 * q_stride, &mut got).unwrap();
            twin_buf.read(i as u64 * q_stride, &mut want).unwrap();
            // The batched kernel splits the slots otherwise than one cache's: f32 sums in another order.
            assert!(got.iter().zip(&want).all(|(a, e)| (a - e).abs() <= 1e-5), "cache {i}");
        }
        let error = ctx.attend_batch_device(&mut handles, 0, &q[..2], &out, None).unwrap_err();
        assert_eq!(error.status, Status::InvalidArgument);
        let error = ctx.attend_batch_device(&mut [], 0, &[], &[], None).unwrap_err();
        assert_eq!(error.status, Status::InvalidArgument);
        assert!(error.message.contains("n_caches is 0"), "{error}");
    }
}

#[test]
fn batch_append_matches_each_cache_alone() {
    let mut random = Random::seeded("batch_append_matches_each_cache_alone");
    for ctx in contexts() {
        let align = ctx.info().unwrap().buffer_offset_alignment as u64;
        let (kv_len, tokens) = (2 * 16, 2);
        let kv_stride = ((tokens * kv_len * 4) as u64).div_ceil(align) * align;
        let mut batch: Vec<Cache<'_>> = (0..3).map(|_| small_cache(&ctx)).collect();
        let mut twins: Vec<Cache<'_>> = (0..3).map(|_| small_cache(&ctx)).collect();
        let (k_buf, v_buf) = (ctx.buffer(3 * kv_stride).unwrap(), ctx.buffer(3 * kv_stride).unwrap());
        for (i, (cache, twin)) in batch.iter_mut().zip(twins.iter_mut()).enumerate() {
            let prompt = 2 * i; // caches of 0, 2 and 4 tokens
            let (k, v) = (random.vec(prompt * kv_len), random.vec(prompt * kv_len));
            for layer in 0..2 {
                if prompt > 0 {
                    cache.append(layer, &k, &v).unwrap();
                    twin.append(layer, &k, &v).unwrap();
                }
            }
        }
        let k: Vec<BufferView<'_>> = (0..3).map(|i| k_buf.view(i * kv_stride)).collect();
        let v: Vec<BufferView<'_>> = (0..3).map(|i| v_buf.view(i * kv_stride)).collect();
        for layer in 0..2 {
            for i in 0..3 {
                k_buf.write(i as u64 * kv_stride, &random.vec(tokens * kv_len)).unwrap();
                v_buf.write(i as u64 * kv_stride, &random.vec(tokens * kv_len)).unwrap();
            }
            let mut handles: Vec<&mut Cache<'_>> = batch.iter_mut().collect();
            ctx.append_batch_device(&mut handles, layer, tokens as u32, &k, &v).unwrap();
            for (i, twin) in twins.iter_mut().enumerate() {
                twin.append_device(layer, tokens as u32, k[i], v[i]).unwrap();
            }
        }
        for (cache, twin) in batch.iter_mut().zip(twins.iter_mut()) {
            assert_eq!(cache.stats().unwrap(), twin.stats().unwrap());
            for layer in 0..2 {
                assert_eq!(cache.read::<f32>(layer).unwrap(), twin.read::<f32>(layer).unwrap(), "layer {layer}");
            }
        }
        // 3 more tokens fit caches 0 and 1 (2 and 4 of 8 held), not cache 2 (6): refused, nothing changed.
        let before: Vec<LayerContents<f32>> = batch.iter_mut().map(|cache| cache.read(0).unwrap()).collect();
        let big = ctx.buffer(3 * kv_len as u64 * 4).unwrap();
        let mut handles: Vec<&mut Cache<'_>> = batch.iter_mut().collect();
        let error = ctx.append_batch_device(&mut handles, 0, 3, &[big.view(0); 3], &[big.view(0); 3]).unwrap_err();
        assert_eq!(error.status, Status::Capacity);
        assert!(error.message.contains("caches[2]"), "{error}");
        for (cache, was) in batch.iter_mut().zip(&before) {
            assert_eq!(&cache.read::<f32>(0).unwrap(), was);
        }
        let mut handles: Vec<&mut Cache<'_>> = batch.iter_mut().collect();
        let error = ctx.append_batch_device(&mut handles, 0, 1, &k[..2], &v).unwrap_err();
        assert_eq!(error.status, Status::InvalidArgument);
        let error = ctx.append_batch_device(&mut [], 0, 1, &[], &[]).unwrap_err();
        assert_eq!(error.status, Status::InvalidArgument);
        assert!(error.message.contains("n_caches is 0"), "{error}");
    }
}

#[test]
fn f16_cache_takes_u16_bits() {
    let ctx = Context::new(Backend::Cpu).unwrap();
    let mut cache = ctx.cache(&CacheDesc { layers: 1, q_heads: 2, kv_heads: 1, head_dim: 8, capacity: 4,
                                          dtype: DType::F16, ..Default::default() }).unwrap();
    let one = 0x3C00u16; // 1.0 in binary16
    let v: Vec<u16> = (0..8).map(|i| 0x3C00 + (i << 10)).collect(); // 1, 2, 4, ..., 128
    cache.append(0, &[one; 8], &v).unwrap();
    let mut out = [0u16; 16];
    cache.attend(0, &[0u16; 16], &mut out).unwrap();
    assert_eq!(out[..8], v[..], "one slot: attention returns its value");
}

#[test]
fn context_is_send() {
    fn assert_send<T: Send>(_: T) {}
    assert_send(Context::new(Backend::Cpu).unwrap());
    let ctx = Context::new(Backend::Cpu).unwrap();
    let handle = std::thread::spawn(move || ctx.info().unwrap().backend);
    assert_eq!(handle.join().unwrap(), Backend::Cpu);
    assert!(kvc::version().starts_with("0.2."));
}

#[test]
fn per_layer_tables_reach_libkvc() {
    let mut random = Random::seeded("per_layer_tables_reach_libkvc");
    let (k, q) = (random.vec(64 * 2 * 32), random.vec(64 * 4 * 32));
    let mut out = vec![0.0; q.len()];
    for ctx in contexts() {
        let tables = [
            (Policy::H2O(EvictionParams { chunk_slots: 64, layer_capacities: Some(vec![40, 24]), ..Default::default() }), 48),
            (Policy::PyramidKv(WindowParams { budget: 25, window: 8, layer_budgets: Some(vec![30, 20]),
                                              ..Default::default() }), 64),
        ];
        for (policy, capacity) in tables {
            let ends_prefill = matches!(policy, Policy::PyramidKv(_));
            let mut cache = ctx.cache(&CacheDesc { layers: 2, q_heads: 4, kv_heads: 2, head_dim: 32, capacity, policy,
                                                   ..Default::default() }).unwrap();
            for layer in 0..2 {
                cache.append(layer, &k, &k).unwrap();
                cache.attend(layer, &q, &mut out).unwrap();
            }
            if ends_prefill {
                cache.end_prefill().unwrap();
            }
            let slots: Vec<u32> = (0..2).map(|l| cache.layer_slots(l).unwrap()).collect();
            assert_eq!(slots, if ends_prefill { vec![30, 20] } else { vec![40, 24] });
        }
    }
}

#[test]
fn freqkv_keeps_its_recent_tokens_whole() {
    let mut random = Random::seeded("freqkv_keeps_its_recent_tokens_whole");
    let (window, sinks, recent, head_dim) = (40u32, 2u32, 5u32, 32u32);
    let kept = sinks + (window - sinks - recent) / 2 + recent; // 2 + floor(0.5 * 33) + 5
    let (k, v, q) = (random.vec((window * 2 * head_dim) as usize), random.vec((window * 2 * head_dim) as usize),
                     random.vec((window * 4 * head_dim) as usize));
    let mut out = vec![0.0; q.len()];
    for ctx in contexts() {
        let policy = Policy::FreqKv(FreqKvParams { sink_tokens: sinks, retain_ratio: 0.5, recent_tokens: recent });
        let mut cache = ctx.cache(&CacheDesc { layers: 1, q_heads: 4, kv_heads: 2, head_dim, capacity: window, policy,
                                               ..Default::default() }).unwrap();
        cache.append(0, &k, &v).unwrap();
        cache.attend(0, &q, &mut out).unwrap();
        let contents = cache.read::<f32>(0).unwrap();
        assert_eq!(contents.slots, kept);
        // Appended as [token][head][d], read as [head][slot][d]: the sinks, then the window's last
        // `recent` tokens right after the compressed middle, bit for bit.
        let row = head_dim as usize;
        for head in 0..2usize {
            let token = |states: &[f32], t: u32| states[(t as usize * 2 + head) * row..][..row].to_vec();
            let slot = |states: &[f32], s: u32| states[(head * kept as usize + s as usize) * row..][..row].to_vec();
            for (read, appended) in [(contents.k.as_slice(), k.as_slice()), (contents.v.as_slice(), v.as_slice())] {
                for s in 0..sinks {
                    assert_eq!(slot(read, s), token(appended, s));
                }
                for r in 0..recent {
                    assert_eq!(slot(read, kept - recent + r), token(appended, window - recent + r));
                }
            }
            let positions: Vec<i32> = contents.positions[head * kept as usize..][..kept as usize].to_vec();
            assert_eq!(positions, (0..kept as i32).collect::<Vec<_>>());
        }
    }
}

#[test]
fn faedkv_ablate_rebuilds_the_middle_without_one_chunk() {
    // FAEDKV's eq. 6 against a direct DFT in f64: the middle's spectrum without the chunk's bins
    // and their mirrors, inverted; the sinks and the window come back unchanged.
    let mut random = Random::seeded("faedkv_ablate_rebuilds_the_middle_without_one_chunk");
    let (tokens, heads, head_dim) = (41u32, 2usize, 8usize);
    let params = FaedKvParams { sinks: 3, recent_window: 5, chunks: 4, ..Default::default() };
    let (k, v) = (random.vec(tokens as usize * heads * head_dim), random.vec(tokens as usize * heads * head_dim));
    let middle = (tokens - 8) as usize;
    for ctx in contexts() {
        let mut cache = ctx.cache(&CacheDesc { layers: 1, q_heads: 2, kv_heads: 2, head_dim: head_dim as u32,
                                               capacity: 64, ..Default::default() }).unwrap();
        cache.append(0, &k, &v).unwrap();
        for pruned in [0usize, 1, 3] {
            let (ablated_k, ablated_v) = cache.faedkv_ablate::<f32>(0, pruned as u32, &params).unwrap();
            let folded: Vec<usize> = (pruned * middle / 4..(pruned + 1) * middle / 4).map(|b| b.min(middle - b)).collect();
            let kept = |bin: usize| !folded.contains(&bin.min(middle - bin));
            for (ablated, appended) in [(&ablated_k, &k), (&ablated_v, &v)] {
                for head in 0..heads {
                    let token = |t: usize, d: usize| appended[(t * heads + head) * head_dim + d] as f64;
                    let slot = |s: usize, d: usize| ablated[(head * tokens as usize + s) * head_dim + d] as f64;
                    for d in 0..head_dim {
                        for t in (0..3).chain(tokens as usize - 5..tokens as usize) {
                            assert_eq!(slot(t, d), token(t, d));
                        }
                        for n in 0..middle {
                            // x[n] = (1/M) sum over kept bins of X[b] e^{2 pi i b n / M}, X[b] = sum_m x[m] e^{-2 pi i b m / M}
                            let mut expected = 0.0;
                            for b in (0..middle).filter(|&b| kept(b)) {
                                let (mut re, mut im) = (0.0, 0.0);
                                for m in 0..middle {
                                    let angle = -2.0 * std::f64::consts::PI * (b * m) as f64 / middle as f64;
                                    re += token(3 + m, d) * angle.cos();
                                    im += token(3 + m, d) * angle.sin();
                                }
                                let angle = 2.0 * std::f64::consts::PI * (b * n) as f64 / middle as f64;
                                expected += re * angle.cos() - im * angle.sin();
                            }
                            expected /= middle as f64;
                            assert!((slot(3 + n, d) - expected).abs() < 1e-4, "chunk {pruned} head {head} n {n} d {d}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn context_options_and_work_memory() {
    let Some(_) = vulkan() else { return };
    let ctx = Context::with_options(&ContextOptions { backend: Backend::Vulkan, cooperative_matrix: false, ..Default::default() })
        .unwrap();
    let info = ctx.info().unwrap();
    assert!(!info.cooperative_matrix);
    assert!(info.matrix_path_detail.contains("turned off"), "{}", info.matrix_path_detail);
    let mut cache = ctx
        .cache(&CacheDesc { layers: 1, q_heads: 4, kv_heads: 2, head_dim: 16, capacity: 64, ..Default::default() })
        .unwrap();
    let mut random = Random::seeded("context_options_and_work_memory");
    let n = 37;
    let kv = random.vec(n * 2 * 16);
    cache.append(0, &kv, &kv).unwrap();
    let mut out = vec![0.0f32; n * 4 * 16];
    cache.attend(0, &random.vec(n * 4 * 16), &mut out).unwrap();
    let held = ctx.info().unwrap().work_bytes_held;
    assert!(held > 0);
    ctx.trim().unwrap();
    assert!(ctx.info().unwrap().work_bytes_held < held);
}
