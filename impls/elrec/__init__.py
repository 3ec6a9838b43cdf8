"""EL-Rec (Wang et al., SC 2022): forward prefix reuse, backward gradient aggregation per unique id."""
