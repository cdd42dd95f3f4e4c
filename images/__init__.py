"""dbi's VM images: the recipe (``recipe``) and its build (``build``, ``dbi image build``);
the PostgreSQL builds they carry (``postgresql``). docs/guest.md is the contract an
image honours; docs/deploy.md takes an image to Harvester."""
