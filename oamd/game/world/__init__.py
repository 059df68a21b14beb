"""World state (§6), all in one place: the JSON documents (``document``), their store with its
subscriptions and change sink (``store``), the NPC world tools (``tools``) and the paths both use
(``paths``)."""
