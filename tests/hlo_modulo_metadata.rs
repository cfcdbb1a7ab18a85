//! HLO compared modulo metadata: a real dump (tests/fixtures/example-cpu, jax 0.10.2) keeps
//! every instruction and loses only its source tables and `metadata={...}` attributes, so two
//! compilations of one program compare equal whatever the compilation cache held.

use ratchet::trace::hlo::hlo_without_metadata;
use ratchet::trace::hlo_stats_from_text;

#[test]
fn a_real_dump_keeps_its_program_and_drops_its_source_locations() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/example-cpu/flash_attention_bq128_bkv128.hlo.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let bare = hlo_without_metadata(&text);
    assert!(text.contains("StackFrames") && text.matches("metadata={").count() == 115);
    assert!(!bare.contains("metadata={") && !bare.contains("StackFrames") && !bare.contains("FileLocations"), "{bare}");
    // Same instructions, same counts.
    let (a, b) = (hlo_stats_from_text(&text), hlo_stats_from_text(&bare));
    assert_eq!(
        (a.total_instructions, a.dot, a.exponential, a.copy, a.loop_copies),
        (b.total_instructions, b.dot, b.exponential, b.copy, b.loop_copies)
    );
    // The same program with its source moved elsewhere (another checkout, another cache state).
    let moved = text.replace("/work/main/target/demo", "/home/someone/elsewhere").replace("stack_frame_id=12", "stack_frame_id=40");
    assert_ne!(moved, text);
    assert_eq!(hlo_without_metadata(&moved), bare);
    // Idempotent.
    assert_eq!(hlo_without_metadata(&bare), bare);
}
