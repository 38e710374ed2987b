//! The error of [`StreamTimeout`](super::StreamTimeout).

use std::{fmt, time::Duration};

/// A deadline of a [`StreamTimeoutLayer`](super::StreamTimeoutLayer) passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamTimedOut {
    /// The call did not answer within this limit.
    FirstDelta(Duration),
    /// The answer was not complete within this limit of the call.
    Whole(Duration),
}

impl fmt::Display for StreamTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamTimedOut::FirstDelta(limit) => {
                write!(f, "the model did not start answering within {limit:?}")
            }
            StreamTimedOut::Whole(limit) => {
                write!(f, "the model's answer was not complete within {limit:?}")
            }
        }
    }
}

impl std::error::Error for StreamTimedOut {}
