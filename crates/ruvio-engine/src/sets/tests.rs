//! Property tests of the set encodings against a model.
