//! The issue-limit probes (`benches/support/peak.rs`, benchmark support outside the library):
//! each runs where its level is available and counts its multiply-accumulates, and is refused
//! elsewhere (on every architecture but x86-64, always).

#[path = "../../benches/support/peak.rs"]
mod peak;

use peak::Probe;

#[test]
fn probes_count_their_macs_and_refuse_what_the_cpu_lacks() {
    for p in Probe::ALL {
        match p.run(3) {
            Some(macs) => {
                assert!(p.is_available(), "{} ran without its level", p.name());
                assert_eq!(macs, 3 * p.macs_per_round());
            }
            None => assert!(!p.is_available() || !cfg!(target_arch = "x86_64"), "{} refused", p.name()),
        }
        assert_eq!(p.run(0), None, "zero rounds");
        assert_eq!(p.level().name(), ["avx512vnni", "avxvnni", "avx2", "amx"][p as usize], "{}", p.name());
    }
}
