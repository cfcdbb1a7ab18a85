//! Protobuf wire-format primitives shared by the capture and HLO readers: wire types and a
//! bounds-checked varint decoder (encoding per <https://protobuf.dev/programming-guides/encoding/>).
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

/// The multi-byte case. With eight bytes in hand, a varint of up to eight bytes (timestamps
/// and durations in picoseconds are five to seven) is found and decoded without a loop: the
/// first byte whose high bit is clear ends it, and three mask-and-shift steps pack its 7-bit
/// groups. Longer ones, and the last bytes of a buffer, go byte by byte.
#[inline(always)]
fn decode_varint_multi(buf: &[u8]) -> Option<(u64, usize)> {
    if let Some(head) = buf.get(..8) {
        let x = u64::from_le_bytes(head.try_into().ok()?);
        let ends = !x & 0x8080_8080_8080_8080;
        if ends != 0 {
            let len = (ends.trailing_zeros() as usize + 1) / 8;
            // Keep the varint's bytes only, their 7 payload bits each.
            let keep = if len == 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 };
            let mut v = x & keep & 0x7f7f_7f7f_7f7f_7f7f;
            v = (v & 0x007f_007f_007f_007f) | ((v & 0x7f00_7f00_7f00_7f00) >> 1);
            v = (v & 0x0000_3fff_0000_3fff) | ((v & 0x3fff_0000_3fff_0000) >> 2);
            v = (v & 0x0000_0000_0fff_ffff) | ((v & 0x0fff_ffff_0000_0000) >> 4);
            return Some((v, len));
        }
    }
    decode_varint_long(buf)
}

/// Nine- and ten-byte varints, and any varint in the last bytes of a buffer.
#[inline(never)]
fn decode_varint_long(buf: &[u8]) -> Option<(u64, usize)> {
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
        // Every length from one to ten bytes, at its edges.
        let mut values = vec![0u64, 1, 300, u64::MAX - 1, u64::MAX, (-5i64) as u64, 1_234_567_890_123];
        for bits in (7..64).step_by(7) {
            values.extend([(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) + 12345]);
        }
        for v in values {
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
