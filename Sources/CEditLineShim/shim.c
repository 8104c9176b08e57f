int vl_dummy(void){return 0;}
