//! A big-endian reader over a byte slice that names the field it failed on.
//!
//! The election formats are fixed layouts of a few integers; a cursor that reports
//! `Truncated` with the field name and offset is all they need (nom's combinators would add
//! error plumbing without removing any code here).

use super::error::{ErrorKind, WireError};

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::new(
                field,
                self.pos,
                ErrorKind::Truncated {
                    needed: n,
                    available: self.remaining(),
                },
            ));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, WireError> {
        let b = self.take(field, 4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, WireError> {
        let b = self.take(field, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
}
