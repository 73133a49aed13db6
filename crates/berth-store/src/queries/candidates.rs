//! Allocation candidates: which providers (a tree, plus sharing providers)
//! could satisfy a request, generated lazily and pruned early.
