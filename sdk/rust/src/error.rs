use std::fmt;

/// The error of a computation. Its text is what the host reports: with a
/// key's inputs in the dead-letter stream when the key failed, with the
/// whole batch when the batch failed.
///
/// Every `std::error::Error` converts into it, so `?` works on the usual
/// fallible calls (parsing, UTF-8, [`ParamError`](crate::ParamError)). It
/// does not implement `std::error::Error` itself, which that conversion
/// rules out, as with `anyhow::Error`.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    batch: bool,
}

impl Error {
    /// An error with `message`. Returned for a key it fails that key;
    /// returned from [`Computation::process`](crate::Computation::process)
    /// it fails the batch.
    pub fn new(message: impl Into<String>) -> Self {
        Error { message: message.into(), batch: false }
    }

    /// An error that fails the whole batch even when it is returned for a
    /// single key: [`Batch::for_each_key`](crate::Batch::for_each_key)
    /// stops at it and passes it on.
    pub fn batch(message: impl Into<String>) -> Self {
        Error { message: message.into(), batch: true }
    }

    /// The error's text as given.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the error fails the whole batch wherever it is returned
    /// (it was made by [`Error::batch`]).
    pub fn fails_batch(&self) -> bool {
        self.batch
    }

    /// The text the envelope carries: never empty, because an empty error
    /// field means success on the wire. The words are the Go SDK's.
    pub(crate) fn wire_text(&self) -> &str {
        if self.message.is_empty() {
            "failed (the error has no message)"
        } else {
            &self.message
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.batch {
            write!(f, "Error::batch({:?})", self.message)
        } else {
            write!(f, "Error({:?})", self.message)
        }
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(err: E) -> Self {
        Error::new(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_std_errors_and_keeps_their_text() {
        fn parse(s: &str) -> Result<i64, Error> {
            Ok(s.parse::<i64>()?)
        }
        let err = parse("x").unwrap_err();
        assert_eq!(err.message(), "invalid digit found in string");
        assert!(!err.fails_batch());
    }

    #[test]
    fn wire_text_is_never_empty() {
        assert_eq!(Error::new("").wire_text(), "failed (the error has no message)");
        assert_eq!(Error::batch("boom").wire_text(), "boom");
        assert!(Error::batch("boom").fails_batch());
    }
}
