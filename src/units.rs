//! How numbers, durations and text are written for people: one place for the formats and the
//! cutting and wrapping to a width that tables, summaries and plots share (a ground-floor module: it imports nothing of ratchet's).

/// `x` with `digits` decimals, or more when that would hide a small value's leading figures.
pub fn sig(x: f64, digits: usize) -> String {
    let a = x.abs();
    if a == 0.0 || a >= 1.0 || !a.is_finite() {
        return format!("{x:.digits$}");
    }
    // Keep three significant figures for values below 1.
    let lead = (-a.log10()).floor() as usize;
    let d = digits.max(lead + 3).min(12);
    format!("{x:.d$}")
}

/// `1h02m`, `3m12s`, `4.2s`.
pub fn fmt_duration(secs: f64) -> String {
    let s = secs.max(0.0);
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let total = s.round() as u64;
    let (h, m, sec) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        format!("{h}h{m:02}m")
    } else {
        format!("{m}m{sec:02}s")
    }
}

/// The display width of `s` in terminal cells (Unicode's East Asian width: a CJK character takes
/// two cells, a combining mark none).
pub fn cells(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// `s` cut to at most `max` cells at a word boundary, with `…` marking the cut.
pub fn cut(s: &str, max: usize) -> String {
    if cells(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    if max == 1 {
        return "…".into();
    }
    // The longest prefix that leaves one cell for the `…` (a wide character never straddles it).
    let mut hard = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > max - 1 {
            break;
        }
        used += w;
        hard.push(c);
    }
    // Back up to the last space when that keeps at least half the room: no word cut in half.
    let soft = match hard.rfind(' ') {
        Some(p) if cells(&hard[..p]) >= max / 2 => hard[..p].trim_end().to_string(),
        _ => hard,
    };
    format!("{soft}…")
}

/// `text` wrapped at spaces into lines of at most `width` cells (a word longer than the line is
/// cut, so no line is ever wider).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![];
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let word = if cells(word) > width { cut(word, width) } else { word.to_string() };
        if !line.is_empty() && cells(&line) + 1 + cells(&word) > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_between_words() {
        assert_eq!(cut("bump the query block to 512 rows", 20), "bump the query…");
        assert_eq!(cut("short", 20), "short");
        assert_eq!(cut("supercalifragilistic", 8), "superca…");
        assert!(cells(&cut("a b c d e f g h", 5)) <= 5);
        let w = wrap("score 1.23 -> 4.56 over the first baseline, measured at different times: +3%", 30);
        assert!(w.iter().all(|l| cells(l) <= 30), "{w:?}");
        assert_eq!(w.join(" "), "score 1.23 -> 4.56 over the first baseline, measured at different times: +3%");
    }

    #[test]
    fn wide_and_combining_characters_take_their_cells() {
        // A CJK character fills two cells, a combining accent none: "e\u{301}" shows as one é.
        assert_eq!(cells("分块大小"), 8);
        assert_eq!(cells("cafe\u{301}"), 4);
        assert_eq!(cells("✔ · ✗ Δ"), 7);
        let cjk = "把查询分块从三十二行增加到一百二十八行以减少网格步数";
        for max in 1..30 {
            let c = cut(cjk, max);
            assert!(cells(&c) <= max, "{max}: {c:?} takes {} cells", cells(&c));
            assert!(cells(&c) + 2 > max, "{max}: {c:?} leaves room unused");
        }
        assert_eq!(cut("re\u{301}sume\u{301} of the run", 9), "re\u{301}sume\u{301}…");
        for l in wrap("在 CPU 上 把查询分块 增加到 128 行 以减少网格步数 再看 roofline", 12) {
            assert!(cells(&l) <= 12, "{l:?}");
        }
    }
}
