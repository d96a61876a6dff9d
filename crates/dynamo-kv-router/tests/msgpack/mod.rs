//! msgpack built by hand, as stock's encoder writes it: string-keyed maps, fixed-size headers.
//! Shared by the test files that pin stock's bytes; each uses only some of it.
#![allow(dead_code)]

pub const NIL: u8 = 0xc0;
pub const TRUE: u8 = 0xc3;

pub fn str_(s: &str) -> Vec<u8> {
    let head = match s.len() {
        n @ 0..=31 => vec![0xa0 | n as u8],
        n => vec![0xd9, n as u8],
    };
    [head, s.as_bytes().to_vec()].concat()
}

/// A u64 in its widest form (0xcf), as some publishers write every id.
pub fn u64_(n: u64) -> Vec<u8> {
    let mut v = vec![0xcf];
    v.extend_from_slice(&n.to_be_bytes());
    v
}

/// An unsigned integer in its shortest form, as rmp-serde writes it.
pub fn uint(n: u64) -> Vec<u8> {
    match n {
        0..=0x7f => vec![n as u8],
        0x80..=0xff => vec![0xcc, n as u8],
        0x100..=0xffff => [&[0xcd][..], &(n as u16).to_be_bytes()].concat(),
        0x1_0000..=0xffff_ffff => [&[0xce][..], &(n as u32).to_be_bytes()].concat(),
        _ => [&[0xcf][..], &n.to_be_bytes()].concat(),
    }
}

pub fn map(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut v = vec![0x80 | entries.len() as u8];
    for (k, val) in entries {
        v.extend(str_(k));
        v.extend_from_slice(val);
    }
    v
}

pub fn arr(items: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![0x90 | items.len() as u8];
    for i in items {
        v.extend_from_slice(i);
    }
    v
}
