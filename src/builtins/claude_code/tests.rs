//! The tools over real files in temporary directories, and real processes.
