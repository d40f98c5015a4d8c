"""The shared layer: who may act (roles), what is in force (immutable frame versions and their
promotions) and what was done (the audit log). Every app above may import it; it imports only
Django and the pure engine and corpus packages."""
