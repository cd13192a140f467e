"""A profile's typed settings: the sections (``settings``), their schema, where each value came
from (``origins``), safe editing of config.yaml (``editing``) and the strict YAML loader."""
