//! Record decoders of the 14 Numax tables (DESIGN.md §2), used by certification.
