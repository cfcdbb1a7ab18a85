//! Protobuf wire-format primitives shared by the capture and HLO readers: wire types and a
//! bounds-checked varint decoder (encoding per https://protobuf.dev/programming-guides/encoding/).
//!
//! Our own few lines instead of `prost`: the readers never build messages, they walk bytes,
//! and the varint is the hottest loop of a two-million-event capture.

/// The wire type of a field (the low three bits of its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint,
    SixtyFourBit,
    LengthDelimited,
    StartGroup,
    EndGroup,
    ThirtyTwoBit,
}

impl WireType {
    /// The wire type of a key, `None` for the unused values 6 and 7.
    #[inline(always)]
    pub fn of_key(key: u64) -> Option<WireType> {
        Some(match key & 7 {
            0 => WireType::Varint,
            1 => WireType::SixtyFourBit,
            2 => WireType::LengthDelimited,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::ThirtyTwoBit,
            _ => return None,
        })
    }
}

/// Decodes a varint at the start of `buf`: its value and its length in bytes. `None` when
/// `buf` ends inside it or it is longer than ten bytes or overflows 64 bits.
#[inline(always)]
pub fn decode_varint(buf: &[u8]) -> Option<(u64, usize)> {
    match buf.first() {
        Some(&b) if b < 0x80 => Some((u64::from(b), 1)),
        Some(_) => decode_varint_multi(buf),
        None => None,
    }
}

/// The multi-byte case. With ten bytes in hand (the longest varint) the loop needs no bounds
/// check per byte; near the end of a buffer it goes byte by byte.
#[inline(never)]
fn decode_varint_multi(buf: &[u8]) -> Option<(u64, usize)> {
    if let Some(head) = buf.get(..10) {
        let b: &[u8; 10] = head.try_into().ok()?;
        let mut v = 0u64;
        for (i, &byte) in b.iter().enumerate() {
            if i == 9 {
                // The tenth byte holds the 64th bit only.
                return (byte <= 1).then(|| (v | u64::from(byte) << 63, 10));
            }
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Some((v, i + 1));
            }
        }
        None
    } else {
        let mut v = 0u64;
        for (i, &byte) in buf.iter().enumerate() {
            if i == 9 {
                return (byte <= 1).then(|| (v | u64::from(byte) << 63, 10));
            }
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Some((v, i + 1));
            }
        }
        None
    }
}

/// Appends `v` as a varint (for hand-made captures in tests).
#[cfg(test)]
pub fn encode_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_bad_varints() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX, (-5i64) as u64] {
            let mut b = Vec::new();
            encode_varint(v, &mut b);
            assert_eq!(decode_varint(&b), Some((v, b.len())), "{v}");
            // Also with trailing bytes (the ten-byte fast path).
            let n = b.len();
            b.extend_from_slice(&[0xff; 12]);
            assert_eq!(decode_varint(&b), Some((v, n)), "{v}");
        }
        assert_eq!(decode_varint(&[]), None);
        assert_eq!(decode_varint(&[0x80]), None);
        assert_eq!(decode_varint(&[0xff; 9]), None);
        // Eleven bytes, or a tenth byte above 1: overlong or past 64 bits.
        assert_eq!(decode_varint(&[0xff; 11]), None);
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(decode_varint(&over), None);
    }
}
