//! The characters own text may not hold beyond control characters: those that change what a
//! reader sees without being seen themselves. A bidirectional control (an override such as
//! U+202E, an isolate, a mark) reorders the text around it, so a title can read one way on a
//! screen and another way to a program; an invisible character (a zero-width space, a word
//! joiner, a byte-order mark, an invisible operator) splits or hides words.
//!
//! Text an owner or agent writes is refused with them; text from outside (a comment, a tool's
//! output) is kept and the characters neutralised where it is recorded. The zero-width joiner
//! and non-joiner (U+200C, U+200D) stay allowed: Persian, the Indic scripts and emoji
//! sequences need them, and they reorder nothing.

/// Whether `c` reorders or hides the text around it (see the module's list).
pub fn reorders_or_hides(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'                      // arabic letter mark
            | '\u{180e}'                // mongolian vowel separator
            | '\u{200b}'                // zero-width space
            | '\u{200e}'..='\u{200f}'   // left-to-right and right-to-left marks
            | '\u{202a}'..='\u{202e}'   // embeddings, overrides and their pop
            | '\u{2060}'..='\u{2064}'   // word joiner, invisible operators
            | '\u{2066}'..='\u{2069}'   // isolates and their pop
            | '\u{feff}' // zero-width no-break space (byte-order mark)
    )
}

/// The first character of `text` that [`reorders_or_hides`], if any.
pub fn first_reordering_or_hiding(text: &str) -> Option<char> {
    text.chars().find(|c| reorders_or_hides(*c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_isolates_and_invisible_characters_are_found_and_joiners_are_not() {
        for c in ['\u{202e}', '\u{2067}', '\u{200b}', '\u{feff}', '\u{200f}'] {
            assert!(reorders_or_hides(c), "U+{:04X}", u32::from(c));
        }
        for c in ['a', 'é', '\u{200c}', '\u{200d}', '\u{05d0}', '\n'] {
            assert!(!reorders_or_hides(c), "U+{:04X}", u32::from(c));
        }
        assert_eq!(
            first_reordering_or_hiding("fix \u{202e}txt.exe"),
            Some('\u{202e}')
        );
    }
}
