"""The metrics the report knows: label, unit, which direction is better and
the exact definition, in the order the report shows them. Counters it does
not know (a scenario's own) are shown after these, under their raw name."""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str          # "s", "ms", "us", "ns", "bytes", "ratio", "count", "1/s", "GB/s", "" (a plain number)
    better: str        # "lower", "higher" or "" (neither)
    definition: str


_M = Metric

KNOWN = [
    _M("time_s", "time", "s", "lower",
       "Time of the scenario's measured region in one repetition: the scenario's own region when it sets one "
       "(CUDA events around GPU work, or CLOCK_MONOTONIC around its host loop), otherwise the wall time of run(). "
       "In sim mode this is host-side bookkeeping only."),
    _M("alloc_p50_ns", "alloc p50", "ns", "lower",
       "Median latency of one allocate call: CLOCK_MONOTONIC read just before and just after the call alone "
       "(bookkeeping outside), nearest-rank quantile over every call (a uniform reservoir of 4 Mi samples beyond that)."),
    _M("alloc_p99_ns", "alloc p99", "ns", "lower", "99th percentile of the allocate latency, as alloc p50."),
    _M("free_p50_ns", "free p50", "ns", "lower", "Median latency of one deallocate call, as alloc p50."),
    _M("free_p99_ns", "free p99", "ns", "lower", "99th percentile of the deallocate latency, as alloc p50."),
    _M("ops_per_s", "ops/s", "1/s", "higher", "(allocs + frees) / time."),
    _M("peak_requested_bytes", "peak requested", "bytes", "",
       "Highest sum of live request sizes during the scenario, counted by the harness (independent of the allocator)."),
    _M("peak_allocated_bytes", "peak allocated", "bytes", "lower",
       "Highest bytes in live blocks after the allocator's rounding, from its own statistics."),
    _M("peak_reserved_bytes", "peak reserved", "bytes", "lower",
       "Highest bytes the allocator held from its upstream at once (cudaMalloc'd or mapped): its peak footprint."),
    _M("device_peak_bytes", "device peak", "bytes", "lower",
       "GPU: highest device memory in use by the case (free memory at the case's start minus cudaMemGetInfo's free "
       "memory, read after every allocation). Sim: the simulated device's peak after its own rounding."),
    _M("frag_ratio", "fragmentation", "ratio", "lower",
       "1 - peak_requested / peak_reserved: the share of the allocator's peak footprint the program never asked for "
       "(GMLake's 1 - utilization). Undefined (left out) when nothing was reserved."),
    _M("ext_frag_peak", "ext. frag. at peak", "ratio", "lower",
       "(free_reserved - largest_free_block) / free_reserved, free_reserved = reserved - allocated, at the moment "
       "requested bytes peaked (TensorFlow BFC's GetFragmentation). Undefined when nothing reserved is free."),
    _M("ext_frag_end", "ext. frag. at end", "ratio", "lower",
       "External fragmentation as above, after the scenario (before the capacity probe)."),
    _M("capacity_ratio", "capacity ratio", "ratio", "higher",
       "After the scenario, with its blocks still live: the largest single allocation the allocator still serves "
       "divided by (capacity - live requested bytes). 1 = every free byte usable in one block; low = out of memory "
       "despite free memory. Exact to 512 B in sim; binary search in 2 MiB steps on a GPU."),
    _M("largest_alloc_bytes", "largest allocation", "bytes", "higher",
       "The largest single allocation found by the capacity probe."),
    _M("capacity_bytes", "capacity", "bytes", "",
       "Device bytes available to the case: sim capacity, or GPU free memory at the start (or --capacity if lower)."),
    _M("leaked_bytes", "leaked", "bytes", "lower",
       "Bytes the upstream still held after the allocator was destroyed (for allocators without an upstream on a GPU: "
       "device bytes not returned)."),
    _M("device_leak_bytes", "device leak", "bytes", "lower",
       "GPU: free device memory at the case's start minus free memory after teardown."),
    _M("upstream_allocs", "upstream allocs", "count", "lower", "Calls that took memory from the upstream."),
    _M("upstream_frees", "upstream frees", "count", "", "Calls that returned memory to the upstream."),
    _M("driver_calls", "driver calls", "count", "lower",
       "CUDA driver calls the upstream's operations stand for (a page mapped: create, map, set access)."),
    _M("oom_retries", "OOM retries", "count", "", "Failed upstream requests retried after freeing cached memory."),
    _M("allocs", "allocs", "count", "", "Successful allocate calls made by the scenario."),
    _M("frees", "frees", "count", "", "Successful deallocate calls made by the scenario."),
    _M("failed_allocs", "failed allocs", "count", "", "Allocate calls that returned an error (out of memory)."),
    _M("live_at_end_bytes", "live at end", "bytes", "", "Requested bytes still live when the scenario returned."),
    _M("reserved_at_end_bytes", "reserved at end", "bytes", "", "Bytes held from the upstream when the scenario returned."),
    _M("cpu_time_s", "CPU time", "s", "", "Process CPU time of the repetition."),
    _M("stats_disagree", "stats disagree", "count", "lower",
       "1 when the allocator's own requested-byte count differs from the harness's (a bug in the allocator)."),
    _M("upstream_misuse", "upstream misuse", "count", "lower",
       "Invalid upstream calls (double free, unknown pointer): 0 for a correct policy."),
]

# --- the harness's self-checks and the device check ---------------------------------------

KNOWN += [
    _M("did_not_fit_allocs", "did not fit", "count", "lower",
       "Allocations of the workload that failed for lack of memory in a repetition that did not fit (status oom; "
       "the scenario said so with cmb_case_set_oom). Absent when the workload fit."),
    _M("upstream_injected_faults", "injected faults", "count", "",
       "Upstream requests refused on purpose by --fault (fault injection); 0 without it."),
    _M("verify_overlaps", "overlapping blocks", "count", "lower",
       "Live blocks that overlapped another live block (a bug in the allocator); 0 for a correct one."),
    _M("verify_misaligned", "misaligned blocks", "count", "lower",
       "Blocks not aligned to 256 bytes, as cudaMalloc's are; 0 for a correct allocator."),
    _M("verify_outside", "blocks outside", "count", "lower",
       "Blocks not inside memory the allocator took from its upstream; 0 for a correct policy."),
    _M("host_heap_bytes", "host heap", "bytes", "", "Host heap in use (mallinfo2) after the repetition."),
    _M("host_heap_growth_bytes", "host heap growth", "bytes", "lower",
       "Host heap at the end of the repetition minus at its start: host memory the allocator kept."),
    _M("host_rss_bytes", "host RSS", "bytes", "", "The case process's resident set size after the repetition."),
    _M("device_dirty_bytes", "device dirty", "bytes", "lower",
       "GPU: device memory already in use by someone else when the case started (the device check)."),
    _M("device_unreturned_bytes", "device unreturned", "bytes", "lower",
       "GPU: device memory the case's process did not give back after it ended (the device check)."),
]

# --- scenario counters: each scenario's own, as docs/scenarios.md defines them ------------------

KNOWN += [
    # churn
    _M("churn_allocations", "churn allocations", "count", "", "churn: allocations made by the random phase."),
    _M("churn_peak_requested_bytes", "churn peak requested", "bytes", "",
       "churn: highest live requested bytes during the random phase (the checkerboard excluded)."),
    _M("churn_peak_reserved_bytes", "churn peak reserved", "bytes", "lower",
       "churn: highest bytes the allocator held during the random phase: the churn's footprint, before the "
       "checkerboard fills the device."),
    _M("churn_frag_ratio", "churn fragmentation", "ratio", "lower",
       "churn: 1 - churn peak requested / churn peak reserved, the random phase's fragmentation (the headline; "
       "frag_ratio covers the checkerboard too)."),
    _M("checkerboard_filled_bytes", "checkerboard filled", "bytes", "",
       "churn: bytes the checkerboard allocated (fill x the capacity left after the churn)."),
    _M("checkerboard_freed_blocks", "checkerboard freed", "count", "",
       "churn: blocks of the checkerboard freed (every other one), leaving holes for the capacity probe."),
    _M("checkerboard_s", "checkerboard time", "s", "", "churn: time of the checkerboard phase (not in time_s)."),
    # replay
    _M("replay_ooms", "failed allocations", "count", "lower",
       "replay: allocations of the trace the allocator could not serve (the replay goes on without them). "
       "0 = the trace fits; more = it did not fit (status oom)."),
    _M("min_capacity_bytes", "min capacity", "bytes", "lower",
       "replay (sim): the smallest device, in 2 MiB steps, from which every larger one replays the trace "
       "without a failed allocation under this allocator (docs/costs.md)."),
    _M("min_capacity_island_bytes", "smaller island", "bytes", "",
       "replay (sim): the lowest capacity below min capacity where the trace also fits, though some "
       "capacity between fails (fit is not monotone; docs/costs.md)."),
    _M("up_alloc_calls", "upstream alloc calls", "count", "",
       "upstream alloc calls the policy made while metered (docs/costs.md)."),
    _M("up_free_calls", "upstream free calls", "count", "",
       "upstream free calls the policy made while metered (docs/costs.md)."),
    _M("up_map_calls", "upstream map calls", "count", "",
       "upstream map calls the policy made while metered (docs/costs.md)."),
    _M("up_unmap_calls", "upstream unmap calls", "count", "",
       "upstream unmap calls the policy made while metered (docs/costs.md)."),
    _M("up_park_calls", "upstream park calls", "count", "",
       "upstream park calls (handles unmapped and kept, to be mapped elsewhere) the policy made while metered "
       "(docs/costs.md)."),
    _M("up_unpark_calls", "upstream unpark calls", "count", "",
       "upstream unpark calls (a kept handle mapped at a new address) the policy made while metered (docs/costs.md)."),
    _M("up_drop_parked_handles", "kept handles released", "count", "",
       "kept handles the policy released with drop_parked while metered (docs/costs.md)."),
    _M("up_map_noaccess_calls", "upstream map calls, access deferred", "count", "",
       "upstream map calls made between defer_access(1) and (0), their cuMemSetAccess left to the end "
       "(docs/costs.md)."),
    _M("up_unpark_noaccess_calls", "upstream unpark calls, access deferred", "count", "",
       "upstream unpark calls made between defer_access(1) and (0), their cuMemSetAccess left to the end "
       "(docs/costs.md)."),
    _M("up_set_access_calls", "access calls at defer_access(0)", "count", "",
       "cuMemSetAccess calls defer_access(0) made, one per contiguous range mapped while deferred "
       "(docs/costs.md)."),
    _M("up_va_reserve_calls", "upstream va_reserve calls", "count", "",
       "upstream va_reserve calls the policy made while metered (docs/costs.md)."),
    _M("up_va_release_calls", "upstream va_release calls", "count", "",
       "upstream va_release calls the policy made while metered (docs/costs.md)."),
    _M("up_event_record_calls", "upstream event_record calls", "count", "",
       "upstream event_record calls the policy made while metered (docs/costs.md)."),
    _M("up_event_query_calls", "upstream event_query calls", "count", "",
       "upstream event_query calls the policy made while metered (docs/costs.md)."),
    _M("up_stream_sync_calls", "upstream stream_sync calls", "count", "",
       "upstream stream_sync calls the policy made while metered (docs/costs.md)."),
    _M("predicted_alloc_time_s", "predicted alloc time", "s", "lower",
       "predicted allocator time on the cost file's GPU: upstream calls, lost overlap and operations "
       "(docs/costs.md)."),
    _M("predicted_alloc_time_last_pass_s", "predicted alloc time, last pass", "s", "lower",
       "replay with passes > 1: the predicted alloc time of the last pass alone, by the policy the passes "
       "before it grew (a training loop's steady steps; docs/costs.md)."),
    _M("predicted_upstream_time_s", "predicted upstream time", "s", "lower",
       "the part of predicted alloc time spent in cudaMalloc/cuMem*/event calls (docs/costs.md)."),
    _M("predicted_sync_time_s", "predicted sync time", "s", "lower",
       "the part of predicted alloc time lost to synchronizing calls (docs/costs.md)."),
    _M("predicted_ops_time_s", "predicted ops time", "s", "lower",
       "the part of predicted alloc time spent in the allocator's own operations (docs/costs.md)."),
    # replay under CMB_EXPLAIN_OOM=1: the first failed allocation explained (docs/explain.md)
    _M("oom_event", "first failure at", "count", "", "replay (explain): the event, counted from the start of "
       "the first pass, whose allocation failed first."),
    _M("oom_request_bytes", "failed request", "bytes", "", "replay (explain): the size the first failed "
       "allocation asked for."),
    _M("oom_rounded_bytes", "failed request rounded", "bytes", "", "replay (explain): the first failed request "
       "as the allocator rounds it (its free_account)."),
    _M("oom_stream", "failed on stream", "count", "", "replay (explain): the stream index of the first failed "
       "allocation (streams numbered in order of first use)."),
    _M("oom_live_requested_bytes", "requested at failure", "bytes", "", "replay (explain): bytes the live blocks "
       "had asked for when the first allocation failed."),
    _M("oom_reserved_bytes", "reserved at failure", "bytes", "", "replay (explain): the allocator's reserved "
       "bytes right after the first failed allocation."),
    _M("oom_allocated_bytes", "allocated at failure", "bytes", "", "replay (explain): the allocator's allocated "
       "bytes (live blocks after rounding) right after the first failed allocation."),
    _M("oom_device_free_bytes", "device free at failure", "bytes", "", "replay (explain): the device's free bytes "
       "outside the allocator right after the first failed allocation."),
    _M("oom_largest_free_bytes", "largest free at failure", "bytes", "", "replay (explain): the allocator's "
       "largest free block, any pool or stream, right after the first failed allocation."),
    _M("oom_free_other_pool_bytes", "free: other pool", "bytes", "", "replay (explain): free bytes in the size "
       "pool the failed request does not use (small vs large)."),
    _M("oom_free_other_stream_bytes", "free: other stream", "bytes", "", "replay (explain): free bytes cached "
       "for a stream other than the failed request's."),
    _M("oom_free_event_wait_bytes", "free: waiting on events", "bytes", "", "replay (explain): bytes freed but "
       "held until events of the streams that used them complete."),
    _M("oom_free_oversize_bytes", "free: above max_split_size", "bytes", "", "replay (explain): free blocks at "
       "or above max_split_size that a smaller request may not split."),
    _M("oom_free_not_contiguous_bytes", "free: not contiguous", "bytes", "", "replay (explain): free mapped "
       "pages of an expandable segment that are not next to each other."),
    _M("oom_free_too_small_bytes", "free: too small", "bytes", "", "replay (explain): free blocks the failed "
       "request could use but each smaller than it."),
    _M("oom_free_usable_bytes", "free: would serve", "bytes", "", "replay (explain): free blocks that would "
       "serve the failed request (0 unless the allocator refused for another reason, such as a limit)."),
    _M("oom_failed_allocs", "failed allocations (explain)", "count", "", "replay (explain): allocations that "
       "failed in the explained repetition, the first included."),
    _M("oom_failed_bytes", "failed bytes", "bytes", "", "replay (explain): the sum of the sizes of every failed "
       "allocation, the first included."),
    _M("oom_largest_failed_bytes", "largest failed", "bytes", "", "replay (explain): the largest request that "
       "failed."),
    _M("oom_last_event", "last failure at", "count", "", "replay (explain): the event of the last failed "
       "allocation."),
    _M("trace_events", "trace events", "count", "", "replay: events in the trace (allocations, frees, syncs)."),
    _M("replayed_events", "replayed events", "count", "", "replay: trace events x passes."),
    _M("trace_allocs", "trace allocations", "count", "", "replay: allocation events in the trace."),
    _M("trace_frees", "trace frees", "count", "", "replay: free events in the trace."),
    _M("trace_streams", "trace streams", "count", "", "replay: distinct streams in the trace (at most 16 kept)."),
    _M("trace_skipped_failures", "skipped failures", "count", "",
       "replay: allocation failures recorded in the trace (RMM logs), not replayed."),
    _M("trace_unknown_frees", "unknown frees", "count", "",
       "replay: frees of blocks allocated before the trace began, not replayed."),
    _M("events_per_s", "events/s", "1/s", "higher", "replay: replayed events / time_s."),
    # stream-async
    _M("traffic_reuse_share", "reuse share", "ratio", "",
       "stream-async: share of phase 1's allocations (rounds >= 1) that got an address the same stream freed the "
       "round before."),
    # gemm-chunked
    _M("chunks", "chunks", "count", "", "gemm-chunked: tiles computed (1 for the whole product)."),
    _M("tile_edge", "tile edge", "count", "", "gemm-chunked: edge of a tile, in matrix elements."),
    _M("budget_bytes", "budget", "bytes", "", "gemm-chunked: the memory budget of the chunked product."),
    _M("tflops", "TFLOP/s", "", "higher", "gemm-chunked (GPU): 2n^3 / time_s, in 10^12 operations per second."),
    _M("gemm_s", "GEMM time", "s", "lower", "gemm-chunked (GPU): the GEMMs' own time (CUDA events around each)."),
    _M("gemm_tflops", "GEMM TFLOP/s", "", "higher", "gemm-chunked (GPU): 2n^3 / gemm_s, in 10^12 per second."),
    _M("max_rel_err", "max rel. error", "", "lower",
       "gemm-chunked (GPU): largest |C_ij - ref_ij| / sum_k |a_ik b_kj| over the checked entries."),
    _M("err_bound", "error bound", "", "", "gemm-chunked: the bound max_rel_err must stay under."),
    _M("samples_checked", "entries checked", "count", "", "gemm-chunked: result entries checked against the reference."),
    # batch-sweep
    _M("max_batch", "largest batch", "count", "higher", "batch-sweep: the largest batch whose training step fits."),
    _M("fail_batch", "first failing batch", "count", "", "batch-sweep: the smallest batch that does not fit."),
    _M("trials", "trials", "count", "", "batch-sweep: trial batches run by the search."),
    _M("cap_bytes", "cap", "bytes", "", "batch-sweep: the memory cap searched under (the capacity when cap=0)."),
    _M("step_ms", "step time", "ms", "lower", "batch-sweep: time of one training step at time_batch, milliseconds."),
    _M("us_per_sample", "time per sample", "us", "lower", "batch-sweep: step time / batch at time_batch, microseconds."),
    _M("max_batch_step_ms", "step time at max", "ms", "lower", "batch-sweep (GPU): step time at max_batch, ms."),
    _M("max_batch_us_per_sample", "per sample at max", "us", "lower",
       "batch-sweep (GPU): step time / batch at max_batch, microseconds."),
    _M("max_batch_peak_requested_bytes", "peak requested at max", "bytes", "",
       "batch-sweep: peak requested bytes of the largest fitting trial."),
    _M("max_batch_peak_reserved_bytes", "peak reserved at max", "bytes", "lower",
       "batch-sweep: peak reserved bytes of the largest fitting trial."),
    _M("max_batch_frag_ratio", "fragmentation at max", "ratio", "lower",
       "batch-sweep: 1 - peak requested / peak reserved of the largest fitting trial."),
    _M("loss_first", "first loss", "", "", "batch-sweep (GPU): loss of the first timed step."),
    _M("loss_last", "last loss", "", "", "batch-sweep (GPU): loss of the last timed step (lower: the model trains)."),
    # leak-check
    _M("iterations_run", "iterations run", "count", "", "leak-check: iterations run."),
    _M("error_paths", "error paths", "count", "", "leak-check: iterations that took the error path."),
    _M("expected_leak_bytes", "expected leak", "bytes", "",
       "leak-check: bytes the program dropped on its error paths (0 for the clean variant); live_at_end_bytes "
       "must equal it."),
    _M("expected_leak_blocks", "expected leaked blocks", "count", "", "leak-check: blocks dropped on error paths."),
    # pinned
    _M("pin_us", "pin", "us", "lower", "pinned (GPU): cudaHostAlloc of the buffer, microseconds."),
    _M("unpin_us", "unpin", "us", "lower", "pinned (GPU): cudaFreeHost of the buffer, microseconds."),
    _M("register_us", "register", "us", "lower", "pinned (GPU): cudaHostRegister of the buffer, microseconds."),
    _M("unregister_us", "unregister", "us", "lower", "pinned (GPU): cudaHostUnregister, microseconds."),
    _M("breakeven_copies_pinned", "break-even copies (pinned)", "count", "lower",
       "pinned (GPU): (pin + unpin time) / (pageable - pinned H2D time per copy): copies that amortise pinning "
       "(absent when pinning saves nothing)."),
    _M("breakeven_copies_registered", "break-even copies (registered)", "count", "lower",
       "pinned (GPU): the same for cudaHostRegister."),
    # contention
    _M("held_bytes", "held by the other process", "bytes", "", "contention: what the other process held."),
    _M("warm_reserved_bytes", "reserved after warm-up", "bytes", "", "contention: reserved bytes after warm-up."),
    _M("available_bytes", "available", "bytes", "",
       "contention: capacity - held - live: what a perfect allocator could still hand out."),
    _M("obtained_bytes", "obtained", "bytes", "higher", "contention: what the demand phase got."),
    _M("contended_capacity_ratio", "contended capacity ratio", "ratio", "higher",
       "contention: obtained / available: 1 = it released whatever it cached; low = it stranded memory."),
    _M("failed_clean", "failed cleanly", "count", "higher",
       "contention: 1 when the allocator's refusal was a clean out-of-memory, 0 for any other error."),
    _M("reserved_at_failure_bytes", "reserved at refusal", "bytes", "",
       "contention: the allocator's reserved bytes when it refused."),
    _M("upstream_frees_under_pressure", "frees under pressure", "count", "",
       "contention: upstream frees during the demand phase (cache released)."),
    _M("recovered_bytes", "recovered", "bytes", "higher", "contention: what the recover phase got after the release."),
    _M("recovery_ratio", "recovery ratio", "ratio", "higher", "contention: recovered / held."),
    _M("guard_stopped", "guard stopped", "count", "", "contention: 1 when the managed-memory guard stopped a phase."),
    # multi-gpu (one rank process per device; docs/scenarios.md#multi-gpu)
    _M("ranks", "ranks", "count", "", "multi-gpu: rank processes run, one per device."),
    _M("context_bytes", "context", "bytes", "",
       "multi-gpu: device memory rank 0's init step took on device 0: one CUDA context (sim: modelled as 512 MiB)."),
    _M("context_ms", "context time", "ms", "lower", "multi-gpu (GPU): rank 0's init step: cudaSetDevice and its context."),
    _M("init_ms_max", "slowest init", "ms", "lower",
       "multi-gpu (GPU): the slowest rank's init step (a rank with a mistake makes two contexts)."),
    _M("foreign_d0_bytes", "others on device 0", "bytes", "lower",
       "multi-gpu: what the ranks other than 0 hold on device 0 after their traffic was freed: the mistakes' cost."),
    _M("foreign_bytes", "on others' devices", "bytes", "lower",
       "multi-gpu: what all ranks hold on devices not their own after their traffic was freed."),
    _M("sum_disagree_bytes", "sums disagree", "bytes", "lower",
       "multi-gpu: largest gap between a device's measured use and the sum of what the ranks hold there."),
    _M("unreturned_bytes", "unreturned after the ranks", "bytes", "lower",
       "multi-gpu: device memory still used (above 32 MiB) 3 s after every rank process exited."),
    _M("rank_leaked_bytes", "ranks' leak", "bytes", "lower",
       "multi-gpu: what the ranks' upstreams still held when their allocator instances were destroyed."),
    _M("xfree_verdict", "cross-device free", "", "",
       "multi-gpu: a block of device 0 freed on a stream of device 1: 0 works, 1 refused, 2 corrupts."),
    _M("xfree_refused", "cross-device free refused", "count", "",
       "multi-gpu: 1 when the allocator refused the free on device 1's stream."),
    _M("xfree_reused", "freed block reused", "count", "",
       "multi-gpu: 1 when the next block of that size on device 0's stream was the block freed across."),
    _M("xfree_misuse", "cross-device misuse", "count", "lower",
       "multi-gpu: calls the upstream refused as misuse (a bad free) during the cross-device free test."),
    _M("xfree_changed_words", "words changed", "count", "lower",
       "multi-gpu (GPU): words of a live sentinel and of the next block that changed, read by a check kernel."),
    _M("peer_pool_reserved_bytes", "pool when mapped", "bytes", "",
       "multi-gpu (GPU): rank 0's pool reserved bytes when it was made accessible to device 1."),
    _M("peer_map_first_us", "first peer mapping", "us", "lower",
       "multi-gpu (GPU): the first cudaMemPoolSetAccess giving device 1 access to rank 0's pool."),
    _M("peer_map_again_us", "peer mapping again", "us", "lower",
       "multi-gpu (GPU): the same cudaMemPoolSetAccess call made a second time."),
    _M("peer_read_ok", "peer read", "count", "higher",
       "multi-gpu (GPU): 1 when a kernel on device 1 read rank 0's pool block back intact."),
    # shared-mem
    _M("smem_max_bytes", "shared memory max", "bytes", "", "shared-mem (GPU): the device's opt-in shared memory maximum."),
    _M("device_free_delta_bytes", "free memory change", "bytes", "",
       "shared-mem (GPU): largest change of free device memory across one level's kernels."),
    _M("free_spread_bytes", "free spread", "bytes", "",
       "shared-mem (GPU): largest difference between levels of free memory right after the same allocations."),
    _M("reserved_spread_bytes", "reserved spread", "bytes", "",
       "shared-mem (GPU): the same for the allocator's reserved bytes."),
    _M("alloc_us_p0", "alloc at 0%", "us", "lower", "shared-mem (GPU): median allocation latency at the smallest level."),
    _M("alloc_us_p100", "alloc at 100%", "us", "lower", "shared-mem (GPU): median allocation latency at the largest level."),
    # multi-gpu (one process per GPU; scenarios/multi_gpu.c)
    _M("ranks", "ranks", "count", "", "multi-gpu: rank processes started, one per device."),
    _M("foreign_d0_bytes", "foreign on device 0", "bytes", "lower",
       "multi-gpu: what the ranks other than 0 hold on device 0 (the cost of the usual mistakes)."),
    _M("foreign_bytes", "foreign", "bytes", "lower", "multi-gpu: what the ranks hold on devices not theirs."),
    _M("sum_disagree_bytes", "sum disagreement", "bytes", "lower",
       "multi-gpu: the largest gap between a device's measured use and the sum of the ranks' shares of it."),
    _M("context_bytes", "context", "bytes", "", "multi-gpu: device memory of one CUDA context (rank 0's init)."),
    _M("context_ms", "context time", "ms", "", "multi-gpu (GPU): time of rank 0's init step (one context)."),
    _M("init_ms_max", "slowest init", "ms", "lower", "multi-gpu: the slowest rank's init (a mistaken rank makes two)."),
    _M("unreturned_bytes", "unreturned", "bytes", "lower",
       "multi-gpu: device memory still in use after every rank exited (beyond a 32 MiB settling slack)."),
    _M("rank_leaked_bytes", "ranks' leak", "bytes", "lower", "multi-gpu: what the ranks' upstreams held at destroy."),
    _M("xfree_verdict", "cross-device free", "count", "",
       "multi-gpu: a block freed from another device's stream: 0 works, 1 refused, 2 corrupts (the note says what)."),
    _M("xfree_refused", "cross-device free refused", "count", "", "multi-gpu: 1 when the allocator refused that free."),
    _M("xfree_reused", "cross-device block reused", "count", "",
       "multi-gpu: 1 when the block freed from another device came back on device 0's stream."),
    _M("xfree_misuse", "cross-device misuse", "count", "lower",
       "multi-gpu: bad upstream calls the cross-device free caused."),
    _M("xfree_changed_words", "cross-device changed words", "count", "lower",
       "multi-gpu (GPU): words of other blocks changed after the cross-device free (check kernels)."),
    _M("peer_map_first_us", "peer map, first", "us", "", "multi-gpu (GPU): the first cudaMemPoolSetAccess for device 1 "
       "on rank 0's pool."),
    _M("peer_map_again_us", "peer map, again", "us", "", "multi-gpu (GPU): the same call a second time."),
    _M("peer_read_ok", "peer read", "count", "higher", "multi-gpu (GPU): 1 when a kernel on device 1 read the block back."),
    _M("peer_pool_reserved_bytes", "peer pool reserved", "bytes", "",
       "multi-gpu (GPU): rank 0's pool reserved bytes when device 1 was given access."),
    # serving
    _M("max_utilization", "max utilization", "ratio", "higher",
       "serving: the highest gpu_memory_utilization (0.001 steps) at which the whole request stream completes "
       "without out of memory, searched on fresh instances."),
    _M("search_trials", "search trials", "count", "", "serving: runs the utilization search made."),
    _M("weights_bytes", "weights", "bytes", "", "serving: the model's weights, live through the run."),
    _M("profile_peak_bytes", "profile peak", "bytes", "",
       "serving: rise of live bytes over the weights during the profiling forward pass."),
    _M("graph_pool_bytes", "graph pool", "bytes", "", "serving: bytes the CUDA-graph capture keeps (pool and inputs)."),
    _M("kv_slab_bytes", "KV slab", "bytes", "", "serving: the KV budget in bytes (the slab, or vAttention's page budget)."),
    _M("kv_blocks", "KV blocks", "count", "higher",
       "serving: KV blocks in the budget (kv=vattention: groups of 2 x layers pages)."),
    _M("kv_tokens", "KV tokens", "count", "higher", "serving: tokens the KV budget admits (kv_blocks x tokens per block)."),
    _M("kv_peak_blocks", "KV peak blocks", "count", "", "serving: most KV blocks held at once."),
    _M("kv_waste_ratio", "KV waste", "ratio", "lower",
       "serving: 1 - tokens stored / tokens of the blocks held, summed over the steps."),
    _M("requests_completed", "requests served", "count", "higher", "serving: requests that finished."),
    _M("preemptions", "preemptions", "count", "lower", "serving: requests preempted when the KV blocks ran out."),
    _M("steps", "engine steps", "count", "", "serving: engine steps to serve the stream."),
    _M("graph_steps", "graph steps", "count", "", "serving: decode steps replayed from a CUDA graph."),
    _M("eager_steps", "eager steps", "count", "", "serving: steps run eagerly (prefill, mixed, or beyond graph_max)."),
    _M("non_kv_slack_bytes", "slack outside KV", "bytes", "lower",
       "serving: highest reserved - requested bytes at a step's end (what the allocator holds beyond live blocks)."),
    _M("stream_tokens", "stream tokens", "count", "", "serving: prompt + output tokens of the whole request stream."),
    _M("stream_span_s", "stream span", "s", "", "serving: arrival of the last request, seconds of virtual time."),
    _M("alloc_us_per_step", "allocator per step", "us", "lower",
       "serving (GPU): time inside allocate and free calls per engine step, microseconds."),
    # planted (hidden, reliability tests only)
    _M("planted_hold_bytes", "planted hold", "bytes", "", "planted (tests): bytes the planted helper process held."),
]

# Counters named with a variable part (the scenario formats the name): the
# first pattern that matches defines them; {0} in the text is that part.
PATTERNS = [
    (r"(r\d+_d\d+)_bytes", "held {0}", "bytes", "",
     "multi-gpu: what rank R holds on device D ({0}) after its traffic was freed: contexts and what its "
     "allocators keep, the sum of the device's use changes across that rank's steps."),
    (r"d(\d+)_bytes", "device {0} in all", "bytes", "",
     "multi-gpu: device {0}'s used memory above the baseline with every rank's traffic freed, measured directly."),
    (r"peer_added_d(\d+)_bytes", "peer mapping on device {0}", "bytes", "",
     "multi-gpu (GPU): device memory the first cudaMemPoolSetAccess added on device {0}."),
    (r"r(\d+)_pool_reserved_bytes", "rank {0} pool reserved", "bytes", "",
     "multi-gpu (GPU): cudaMemPoolAttrReservedMemCurrent of rank {0}'s pool with its traffic live."),
    (r"r(\d+)_pool_used_bytes", "rank {0} pool used", "bytes", "",
     "multi-gpu (GPU): cudaMemPoolAttrUsedMemCurrent of rank {0}'s pool with its traffic live."),
    (r"r(\d+)_pool_cached_bytes", "rank {0} pool kept", "bytes", "",
     "multi-gpu (GPU): rank {0}'s pool reserved bytes after its traffic was freed and synchronized."),
    (r"r(\d+)_stray_pool_reserved_bytes", "rank {0} device-0 pool", "bytes", "",
     "multi-gpu (GPU): reserved bytes of the device-0 pool rank {0} touched by mistake (pool0), after the free."),
    (r"reuse_first_(\w+)", "reuse first ({0})", "ratio", "",
     "stream-async: share of trials whose first allocation on the other stream returned the freed address "
     "(pattern {0}: same stream, event-synchronized, or none)."),
    (r"reuse_hit_(\w+)", "reuse hit ({0})", "ratio", "",
     "stream-async: share of trials that got the freed address back within the window (pattern {0})."),
    (r"reuse_wait_us_(\w+)", "reuse wait ({0})", "us", "lower",
     "stream-async (GPU): median time from the free to the allocation that returned it, microseconds (pattern {0})."),
    (r"stall_us_(\w+)", "stall ({0})", "us", "",
     "stream-async (GPU): median time the fill queued after the last allocation took to complete, microseconds "
     "(pattern {0}); about spin_us for `none` means the allocator made the stream wait."),
    (r"oom_pin(\d+)_bytes", "pin {0} size", "bytes", "",
     "replay (explain): the {0}th largest live block when the first allocation failed (ties: the oldest)."),
    (r"oom_pin(\d+)_event", "pin {0} allocated at", "count", "",
     "replay (explain): the event that allocated the {0}th largest live block at the first failure."),
    (r"oom_pin(\d+)_age_events", "pin {0} age", "count", "",
     "replay (explain): events between the allocation of the {0}th largest live block and the first failure."),
    (r"r(\d+)_d(\d+)_bytes", "rank {0} on device {1}", "bytes", "",
     "multi-gpu: what rank {0} holds on device {1} after its traffic was freed (its contexts, what its allocator "
     "keeps)."),
    (r"d(\d+)_bytes", "device {0}", "bytes", "", "multi-gpu: device {0}'s use above the baseline, measured directly."),
    (r"peer_added_d(\d+)_bytes", "peer map added on device {0}", "bytes", "",
     "multi-gpu (GPU): what the first peer mapping added on device {0}."),
    (r"r(\d+)_(pool_reserved|pool_used|pool_cached|stray_pool_reserved)_bytes", "rank {0} {1}", "bytes", "",
     "multi-gpu (GPU): rank {0}'s cudaMemPool attribute {1} (reserved and used with the traffic live, cached after "
     "it was freed; stray: the device-0 pool after the pool0 mistake)."),
    (r"occ_p(\d+)", "occupancy at {0}%", "ratio", "",
     "shared-mem (GPU): theoretical occupancy with {0}% of the maximum dynamic shared memory."),
    (r"kernel_us_p(\d+)", "kernel at {0}%", "us", "lower",
     "shared-mem (GPU): median time of one pass over one buffer at {0}% shared memory, microseconds."),
    (r"h2d_gbs_(\w+)", "H2D {0}", "GB/s", "higher",
     "pinned (GPU): median host-to-device copy rate from {0} host memory, 10^9 bytes/s."),
    (r"d2h_gbs_(\w+)", "D2H {0}", "GB/s", "higher",
     "pinned (GPU): median device-to-host copy rate into {0} host memory, 10^9 bytes/s."),
]

BY_NAME = {m.name: m for m in KNOWN}

# The summary ranks allocators on these (the headline of each scenario).
RANKED = ["time_s", "peak_reserved_bytes", "frag_ratio", "capacity_ratio"]

# The per-case tables show these first (when present), then every other counter.
DETAIL = ["time_s", "alloc_p50_ns", "alloc_p99_ns", "free_p50_ns", "peak_requested_bytes", "peak_reserved_bytes",
          "device_peak_bytes", "frag_ratio", "ext_frag_peak", "ext_frag_end", "capacity_ratio", "leaked_bytes"]

# The cross-GPU comparison puts these side by side.
COMPARED = ["time_s", "alloc_p50_ns", "free_p50_ns", "peak_reserved_bytes", "device_peak_bytes", "frag_ratio",
            "capacity_ratio"]

# Scenario-specific figures find their data under the first name present.
LARGEST_BATCH = ["largest_batch", "max_batch", "largest_batch_size", "max_batch_size"]
BUDGET_PARAMS = ["budget", "mem_budget", "memory_budget", "budget_bytes"]
SIZE_PARAMS = ["size", "max_size", "block_size"]
BATCH_SCENARIOS = ["batch-sweep"]
GEMM_SCENARIOS = ["gemm-chunked"]


def metric(name):
    """The catalog entry of a counter; a pattern's for a counter named with
    a variable part; an unknown one gets a plain entry (defined() says so)."""
    m = BY_NAME.get(name)
    if m:
        return m
    for pattern, label, unit, better, definition in PATTERNS:
        hit = re.fullmatch(pattern, name)
        if hit:
            return Metric(name, label.format(*hit.groups()), unit, better, definition.format(*hit.groups()))
    unit = "bytes" if name.endswith("_bytes") else "s" if name.endswith("_s") else \
        "ns" if name.endswith("_ns") else ""
    return Metric(name, name, unit, "", UNDEFINED)


UNDEFINED = "A counter without a definition in plots/cmb_report/metrics.py."


def defined(name):
    """Whether a counter has its own definition."""
    return metric(name).definition != UNDEFINED


def ordered(names):
    """Known metrics in catalog order, then the rest alphabetically."""
    names = set(names)
    known = [m.name for m in KNOWN if m.name in names]
    return known + sorted(names - set(known))


# --- formatting --------------------------------------------------------------------

_BYTES = [(1024.0 ** i, u) for i, u in enumerate(["B", "KiB", "MiB", "GiB", "TiB", "PiB"])]
_SECONDS = [(1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s")]


def _scaled(v, units):
    """v in the largest unit it reaches (after rounding to 3 digits)."""
    factor, name = units[0]
    for f, n in units:
        if abs(v) >= f * 0.9995:
            factor, name = f, n
    x = v / factor
    return f"{x:.3g} {name}" if abs(x) < 999.5 else f"{x:.0f} {name}"


def fmt_bytes(v):
    return f"{v:.0f} B" if abs(v) < 1023.5 else _scaled(float(v), _BYTES)


def fmt_seconds(v):
    return "0 s" if v == 0 else _scaled(float(v), _SECONDS)


def fmt_value(name, v):
    """A value in the unit of its metric, short enough for a table cell."""
    unit = metric(name).unit
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "s":
        return fmt_seconds(v)
    if unit == "ns":
        return fmt_seconds(v * 1e-9)
    if unit == "us":
        return fmt_seconds(v * 1e-6)
    if unit == "ms":
        return fmt_seconds(v * 1e-3)
    if unit == "GB/s":
        return f"{v:.3g} GB/s"
    if unit == "ratio":
        return f"{v:.3f}"
    if unit == "count" or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:.4g}"
