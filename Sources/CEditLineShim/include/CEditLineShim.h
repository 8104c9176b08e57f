int vl_dummy(void);
