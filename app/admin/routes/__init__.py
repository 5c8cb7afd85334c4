"""The admin screens' routes, one module per screen; app/admin/router.py includes them."""
