"""The figure links the pages show, generated so that the reference machine's name in their paths has one home
(results/REFERENCE_MACHINE): a block per page, each link relative to that page."""
from __future__ import annotations

# block name -> (the page's path back to the repository root, [(alt text, experiment, figure file)])
FIGURE_BLOCKS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "readme-figures": ("", [("EcoRec per dataset", "sc24", "datasets_speedup.png"),
                            ("scale model validation", "scale_model", "validation.png"),
                            ("table size", "table_size", "table_size.png")]),
    "compression-figures": ("../../", [("compression frontier", "compression", "compression_frontier.png"),
                                       ("compression step time", "compression", "compression_step_time.png")]),
}


def figure_blocks(machine: str) -> dict[str, list[str]]:
    """Each block's image links to ``machine``'s figures."""
    return {name: [f"![{alt}]({up}figures/{exp}/{machine}/{fig})" for alt, exp, fig in links]
            for name, (up, links) in FIGURE_BLOCKS.items()}
