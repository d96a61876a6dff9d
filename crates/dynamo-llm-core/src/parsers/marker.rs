//! Finding markers (`<think>`, `<tool_call>`, ...) in text that arrives in pieces.

/// Where the earliest of `markers` starts in `text`, and which one it is.
pub(crate) fn find_first(text: &str, markers: &[&str]) -> Option<(usize, usize)> {
    markers
        .iter()
        .enumerate()
        .filter_map(|(i, m)| text.find(m).map(|at| (at, i)))
        .min()
}

/// The length of the longest tail of `text` that is the start of one of `markers`: text that
/// must be held back because the next piece may complete the marker.
pub(crate) fn partial_tail(text: &str, markers: &[&str]) -> usize {
    let mut longest = 0;
    for marker in markers {
        let max = marker.len().saturating_sub(1).min(text.len());
        for len in (longest + 1..=max).rev() {
            let start = text.len() - len;
            if text.is_char_boundary(start) && marker.starts_with(&text[start..]) {
                longest = len;
                break;
            }
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_earliest_marker() {
        assert_eq!(find_first("a </b> <a>", &["<a>", "</b>"]), Some((2, 1)));
        assert_eq!(find_first("none", &["<a>"]), None);
    }

    #[test]
    fn holds_back_a_marker_prefix() {
        assert_eq!(partial_tail("text <thi", &["<think>"]), 4);
        assert_eq!(partial_tail("text <", &["<think>", "</think>"]), 1);
        assert_eq!(partial_tail("text", &["<think>"]), 0);
        assert_eq!(partial_tail("é<", &["<｜tool"]), 1);
    }
}
