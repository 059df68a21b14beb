"""A local p4a recipe for orjson (p4a has none): a Rust/PyO3 extension built with maturin, the same
way p4a's own ``pydantic-core`` recipe builds (``RustCompiledComponentsRecipe``: ``rustup`` on the
build machine, the NDK's clang as the cargo linker). Unverified: no build has run (README's
checklist)."""

from pythonforandroid.recipe import RustCompiledComponentsRecipe


class OrjsonRecipe(RustCompiledComponentsRecipe):
    version = "3.13.0"  # the version the daemon is tested with here
    url = "https://files.pythonhosted.org/packages/source/o/orjson/orjson-{version}.tar.gz"
    site_packages_name = "orjson"


recipe = OrjsonRecipe()
